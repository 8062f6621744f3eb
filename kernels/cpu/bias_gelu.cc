#include "kernels/bias_gelu.h"

namespace h3::kernels {

void BiasGeluCpu(const BiasGeluParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * p.cols;
    float* out = p.out + r * p.cols;
    for (int64_t c = 0; c < p.cols; ++c) {
      out[c] = GeluTanh(x[c] + (p.bias != nullptr ? p.bias[c] : 0.0f));
    }
  }
}

}  // namespace h3::kernels
