#include "kernels/h3_chunked.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>

#include "base/half_float.h"

namespace h3::kernels::chunked {

namespace {

// The SSM kernel's first taps of channel c, K[i] = 2 Re(sum_m C dA^i dB),
// i < count, in double.
std::vector<double> SsmKernelTaps(const H3Weights& w, int c, int count) {
  using cdouble = std::complex<double>;
  const int modes = w.shape.modes();
  std::vector<double> taps(count, 0.0);
  for (int m = 0; m < modes; ++m) {
    const int i = c * modes + m;
    const cdouble da(w.dA[2 * i], w.dA[2 * i + 1]);
    // C dA^k dB for k = 0, 1, ...: one multiplication a tap, in double.
    cdouble term = cdouble(w.C[2 * i], w.C[2 * i + 1]) *
                   cdouble(w.dB[2 * i], w.dB[2 * i + 1]);
    for (int k = 0; k < count; ++k) {
      taps[k] += 2.0 * term.real();
      term *= da;
    }
  }
  return taps;
}

}  // namespace

std::vector<ChunkedChannel> ChunkedChannels(const H3Weights& w) {
  const int heads = w.shape.heads();
  std::vector<ChunkedChannel> out(heads);
  for (int c = 0; c < heads; ++c) {
    ChunkedChannel& s = out[c];
    std::memset(&s, 0, sizeof(s));
    const std::vector<double> k = SsmKernelTaps(w, c, kColumn);
    double most = 0;
    for (double x : k) most = std::max(most, std::abs(x));
    s.scale_t = static_cast<float>(most);
    for (int j = 0; j < kColumn; ++j) {
      for (int i = 0; i <= j; ++i) {
        s.t16[j][i] =
            FloatToHalf(most > 0 ? static_cast<float>(k[j - i] / most) : 0.0f);
      }
    }
  }
  return out;
}

}  // namespace h3::kernels::chunked
