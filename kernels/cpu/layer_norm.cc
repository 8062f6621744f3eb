#include "kernels/layer_norm.h"

#include <cmath>

#include "base/half_float.h"
#include "base/parallel.h"

namespace h3::kernels {

void AddLayerNormCpu(const AddLayerNormParams& p) {
  ParallelFor(p.rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* x = p.x + r * p.cols;
      float* res = p.residual + r * p.cols;
      const float* in =
          (p.residual_in != nullptr ? p.residual_in : p.residual) + r * p.cols;
      double sum = 0;
      for (int64_t c = 0; c < p.cols; ++c) {
        res[c] = p.add_residual ? x[c] + in[c] : x[c];
        sum += res[c];
      }
      const double mean = sum / p.cols;
      double var = 0;
      for (int64_t c = 0; c < p.cols; ++c) {
        const double dev = res[c] - mean;
        var += dev * dev;
      }
      const double inv = 1.0 / std::sqrt(var / p.cols + p.eps);
      for (int64_t c = 0; c < p.cols; ++c) {
        const float v =
            static_cast<float>((res[c] - mean) * inv * p.gamma[c] + p.beta[c]);
        StoreFloat(p.out, p.out_type, r * p.cols + c, v);
      }
    }
  });
}

}  // namespace h3::kernels
