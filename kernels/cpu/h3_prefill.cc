// H3 prefill on the CPU: FFT convolution of a chunk, plus the contribution of
// the state carried in, plus the state handed on (paper section 4, state
// passing). Work is split across heads: a head's p channels of k and v, its
// p * p kv channels and its outputs depend on nothing else.
#include <algorithm>
#include <complex>
#include <vector>

#include "base/parallel.h"
#include "kernels/cpu/fft.h"
#include "kernels/h3.h"

namespace h3::kernels {
namespace {

using cdouble = std::complex<double>;

// Per-thread scratch space for one head.
struct Scratch {
  explicit Scratch(int nfft, int64_t length, int p)
      : fft(nfft),
        kbar(static_cast<size_t>(p) * length),
        kv(length),
        v(static_cast<size_t>(p) * length),
        y(static_cast<size_t>(p) * p * length),
        time(nfft),
        freq(nfft + 2) {}
  RealFft fft;
  std::vector<float> kbar;  // [p, L]: kbar of the head's channels
  std::vector<float> kv;    // [L]: one kv channel
  std::vector<float> v;     // [p, L]
  std::vector<float> y;     // [p * p, L]: SSM output per kv channel
  std::vector<float> time;  // [nfft]
  std::vector<float> freq;  // [nfft/2 + 1] complex
};

// kbar[t] for channel c over the chunk at positions [start, start + L), and
// c's ring of raw inputs after it (kernels/h3.h):
// kbar[t] = sum_{j < N} kshift[j] in(t - j) + shift_D k[t], where in(i) is
//           k[i] inside the chunk and, for i < 0, the input at position
//           start + i from the ring (zero before position 0);
// then the chunk's last min(L, N) inputs go to their slots.
void ShiftSsm(const H3PrefillParams& p, int c, float* kbar) {
  const int d = p.w.shape.d_model, n_state = p.w.shape.d_state;
  const int64_t len = p.length;
  const float* taps = p.w.shift_kernel + c * n_state;
  float* ring = p.state.shift + c * n_state;
  const float dk = p.w.shift_D[c];
  auto k = [&](int64_t t) { return p.k[t * d + c]; };
  auto in = [&](int64_t i) -> float {
    if (i >= 0) return k(i);
    const int64_t position = p.start + i;
    return position < 0 ? 0.0f : ring[position % n_state];
  };

  for (int64_t t = 0; t < len; ++t) {
    double sum = double{dk} * k(t);
    for (int64_t j = 0; j < n_state; ++j) sum += double{taps[j]} * in(t - j);
    kbar[t] = static_cast<float>(sum);
  }
  for (int64_t t = std::max<int64_t>(0, len - n_state); t < len; ++t) {
    ring[(p.start + t) % n_state] = k(t);
  }
}

// y = K * kv + D kv + (carried state's output) for one kv channel, and the
// channel's diagonal state after the chunk:
//   y[t] += 2 Re(sum_m C[m] dA[m]^(t+1) x0[m])
//   x_end = dA^L x0 + sum_j dA^(L-1-j) dB kv[j]
void DiagSsm(const H3PrefillParams& p, int h, const float* kv, float* x,
             float* y, Scratch& scratch) {
  const int nfft = p.nfft, bins = nfft / 2 + 1, modes = p.w.shape.modes();
  const int64_t len = p.length;

  // Long convolution by FFT: zero-padded to nfft >= 2L, so no wrap-around.
  std::fill(scratch.time.begin(), scratch.time.end(), 0.0f);
  std::copy(kv, kv + len, scratch.time.begin());
  scratch.fft.Forward(scratch.time.data(), scratch.freq.data());
  const float* spectrum = p.kernel_spectrum + 2 * static_cast<size_t>(h) * bins;
  for (int f = 0; f < bins; ++f) {
    const std::complex<float> a(scratch.freq[2 * f], scratch.freq[2 * f + 1]);
    const std::complex<float> b(spectrum[2 * f], spectrum[2 * f + 1]);
    const std::complex<float> prod = a * b;
    scratch.freq[2 * f] = prod.real();
    scratch.freq[2 * f + 1] = prod.imag();
  }
  scratch.fft.Inverse(scratch.freq.data(), scratch.time.data());
  const float scale = 1.0f / static_cast<float>(nfft);
  const float skip = p.w.D[h];
  for (int64_t t = 0; t < len; ++t)
    y[t] = scratch.time[t] * scale + skip * kv[t];

  // State passing, in double: one pass over the chunk per mode.
  const float* dA = p.w.dA + 2 * static_cast<size_t>(h) * modes;
  const float* dB = p.w.dB + 2 * static_cast<size_t>(h) * modes;
  const float* C = p.w.C + 2 * static_cast<size_t>(h) * modes;
  for (int m = 0; m < modes; ++m) {
    const cdouble a(dA[2 * m], dA[2 * m + 1]);
    const cdouble b(dB[2 * m], dB[2 * m + 1]);
    const cdouble c(C[2 * m], C[2 * m + 1]);
    cdouble carried(x[2 * m], x[2 * m + 1]);  // dA^(t+1) x0 after step t
    cdouble fresh = 0;                        // sum_j dA^(t-j) dB kv[j]
    const bool has_state = carried != 0.0;
    for (int64_t t = 0; t < len; ++t) {
      fresh = a * fresh + b * double{kv[t]};
      if (has_state) {
        carried *= a;
        y[t] += static_cast<float>(2.0 * (c * carried).real());
      }
    }
    const cdouble end = carried + fresh;
    x[2 * m] = static_cast<float>(end.real());
    x[2 * m + 1] = static_cast<float>(end.imag());
  }
}

void PrefillHead(const H3PrefillParams& p, int h, Scratch& s) {
  const H3Shape& shape = p.w.shape;
  const int d = shape.d_model, pd = shape.head_dim, heads = shape.heads();
  const int modes = shape.modes();
  const int64_t len = p.length;

  for (int i = 0; i < pd; ++i) {
    const int c = h * pd + i;
    ShiftSsm(p, c, s.kbar.data() + i * len);
    for (int64_t t = 0; t < len; ++t) s.v[i * len + t] = p.v[t * d + c];
  }
  std::vector<float>& kv = s.kv;
  for (int d1 = 0; d1 < pd; ++d1) {
    for (int d2 = 0; d2 < pd; ++d2) {
      for (int64_t t = 0; t < len; ++t) {
        kv[t] = s.kbar[d1 * len + t] * s.v[d2 * len + t];
      }
      const size_t channel = static_cast<size_t>(d1 * pd + d2) * heads + h;
      float* x = p.state.diag + 2 * channel * modes;
      DiagSsm(p, h, kv.data(), x, s.y.data() + (d1 * pd + d2) * len, s);
    }
  }
  // out[t][d2 * H + h] = sum_d1 q[t][h * p + d1] * y[(d1, d2)][t]
  for (int64_t t = 0; t < len; ++t) {
    for (int d2 = 0; d2 < pd; ++d2) {
      float sum = 0;
      for (int d1 = 0; d1 < pd; ++d1) {
        sum += p.q[t * d + h * pd + d1] * s.y[(d1 * pd + d2) * len + t];
      }
      p.out[t * d + d2 * heads + h] = sum;
    }
  }
}

}  // namespace

void H3PrefillCpu(const H3PrefillParams& p) {
  if (p.length == 0) return;
  const int heads = p.w.shape.heads(), pd = p.w.shape.head_dim;
  ParallelFor(heads, std::max(1, 16 / (pd * pd)),
              [&](int64_t begin, int64_t end) {
                Scratch scratch(p.nfft, p.length, pd);
                for (int64_t h = begin; h < end; ++h) {
                  PrefillHead(p, static_cast<int>(h), scratch);
                }
              });
}

}  // namespace h3::kernels
