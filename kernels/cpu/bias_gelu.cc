#include "kernels/bias_gelu.h"

#include "base/half_float.h"

namespace h3::kernels {

void BiasGeluCpu(const BiasGeluParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * p.cols;
    for (int64_t c = 0; c < p.cols; ++c) {
      const float b =
          p.bias != nullptr ? LoadFloat(p.bias, p.bias_type, c) : 0.0f;
      StoreFloat(p.out, p.out_type, r * p.cols + c, GeluTanh(x[c] + b));
    }
  }
}

}  // namespace h3::kernels
