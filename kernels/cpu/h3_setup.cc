// Load-time preparation of an H3 layer: discretisation and kernel spectra.
#include <complex>
#include <vector>

#include "base/parallel.h"
#include "kernels/cpu/fft.h"
#include "kernels/h3.h"

namespace h3::kernels {

using cdouble = std::complex<double>;

int H3FftSize(int64_t length) {
  int nfft = 2;
  while (nfft < 2 * length) nfft *= 2;
  return nfft;
}

void H3Discretize(const H3RawParams& raw, const H3DiscretizedBuffers& out) {
  const int d = raw.shape.d_model, n_state = raw.shape.d_state;
  const int heads = raw.shape.heads(), modes = raw.shape.modes();
  // kshift[c][j] = sum_n B[c][n] C[c][n + j]: the correlation of B and C.
  for (int c = 0; c < d; ++c) {
    const float* b = raw.shift_B + c * n_state;
    const float* cc = raw.shift_C + c * n_state;
    for (int j = 0; j < n_state; ++j) {
      double sum = 0;
      for (int n = 0; n + j < n_state; ++n) sum += double{b[n]} * cc[n + j];
      out.shift_kernel[c * n_state + j] = static_cast<float>(sum);
    }
  }
  for (int h = 0; h < heads; ++h) {
    const double dt = std::exp(double{raw.log_dt[h]});
    for (int m = 0; m < modes; ++m) {
      const int i = h * modes + m;
      const cdouble a(-std::exp(double{raw.inv_A_real[i]}), raw.A_imag[i]);
      const cdouble b(raw.B[2 * i], raw.B[2 * i + 1]);
      const cdouble denom = 1.0 - dt * a / 2.0;
      const cdouble da = (1.0 + dt * a / 2.0) / denom;
      const cdouble db = b * dt / denom;
      out.dA[2 * i] = static_cast<float>(da.real());
      out.dA[2 * i + 1] = static_cast<float>(da.imag());
      out.dB[2 * i] = static_cast<float>(db.real());
      out.dB[2 * i + 1] = static_cast<float>(db.imag());
    }
  }
}

void H3KernelSpectrum(const H3Weights& w, int nfft, float* out) {
  const int heads = w.shape.heads(), modes = w.shape.modes();
  const int bins = nfft / 2 + 1;
  ParallelFor(heads, 8, [&](int64_t begin, int64_t end) {
    RealFft fft(nfft);
    std::vector<cdouble> coeff(modes), power(modes), dA(modes);
    std::vector<float> kernel(nfft, 0.0f);
    for (int64_t h = begin; h < end; ++h) {
      for (int m = 0; m < modes; ++m) {
        const int i = static_cast<int>(h) * modes + m;
        const cdouble c(w.C[2 * i], w.C[2 * i + 1]);
        const cdouble db(w.dB[2 * i], w.dB[2 * i + 1]);
        coeff[m] = c * db;
        dA[m] = cdouble(w.dA[2 * i], w.dA[2 * i + 1]);
        power[m] = 1.0;
      }
      // K[l] = 2 Re(sum_m C dB dA^l) for l < nfft / 2; zero padding above.
      for (int l = 0; l < nfft / 2; ++l) {
        cdouble sum = 0;
        for (int m = 0; m < modes; ++m) {
          sum += coeff[m] * power[m];
          power[m] *= dA[m];
        }
        kernel[l] = static_cast<float>(2.0 * sum.real());
      }
      fft.Forward(kernel.data(), out + 2 * h * bins);
    }
  });
}

}  // namespace h3::kernels
