// SkinnyGemmEmulation: the batch-invariant decode product's algorithm
// (kernels/skinny_gemm.h) step by step on the host; the GPU kernel must give
// the same bits. Compiled with -ffp-contract=off (kernels/CMakeLists.txt), so
// every * and + rounds on its own, as the kernel's _rn intrinsics do. x and W
// are widened and y rounded with base/half_float.h, whose bits are those of
// the kernel's conversion intrinsics.
#include "kernels/skinny_gemm.h"

#include <cstdint>

#include "base/half_float.h"

namespace h3::kernels {

void SkinnyGemmEmulation(const SkinnyGemmParams& p) {
  const int64_t chunks = (p.k + kSkinnyChunk - 1) / kSkinnyChunk;
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t j = 0; j < p.n; ++j) {
      float partial[kSkinnyLanes];
      for (int lane = 0; lane < kSkinnyLanes; ++lane) {
        float acc = 0.0f;
        for (int64_t c = 0; c < chunks; ++c) {
          for (int e = 0; e < kSkinnyLaneElems; ++e) {
            const int64_t i = c * kSkinnyChunk + lane * kSkinnyLaneElems + e;
            const float xv =
                i < p.k ? LoadFloat(p.x, p.x_type, r * p.k + i) : 0.0f;
            const float wv =
                i < p.k ? LoadFloat(p.w, p.w_type, j * p.k + i) : 0.0f;
            acc = SkinnyFma(xv, wv, acc);
          }
        }
        partial[lane] = acc;
      }
      for (int width = kSkinnyLanes / 2; width > 0; width /= 2) {
        for (int l = 0; l < width; ++l) {
          partial[l] = SkinnyAdd(partial[l], partial[l + width]);
        }
      }
      float out = partial[0];
      if (p.bias != nullptr) {
        out = SkinnyAdd(out, LoadFloat(p.bias, p.bias_type, j));
      }
      if (p.gelu) out = SkinnyGeluTanh(out);
      StoreFloat(p.y, p.y_type, r * p.n + j, out);
    }
  }
}

}  // namespace h3::kernels
