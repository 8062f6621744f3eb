// The former kernels/cpu/skinny_gemm.cc, unchanged but for its names.
#include "bench/skinny_gemm_baseline.h"

#include <algorithm>

namespace h3::bench {
namespace {

// Every dot product is summed in 64 lanes (4 x 16 with AVX-512, 8 x 8 with
// AVX2: enough independent vector FMAs in flight), then the lanes are added
// as a tree. The order is the same for every row however many rows there
// are, so a row's result never depends on its batch.
constexpr int64_t kLanes = 64;
// Rows computed together: their 4 x 64 accumulators fill half the AVX-512
// registers, and each chunk of W is loaded once for all of them.
constexpr int kGroup = 4;

template <int G>
[[gnu::always_inline]] inline void DotGroup(const float* x, int64_t k,
                                            const float* w, float* out) {
  float acc[G][kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    for (int r = 0; r < G; ++r) {
      for (int64_t l = 0; l < kLanes; ++l) {
        acc[r][l] += x[r * k + i + l] * w[i + l];
      }
    }
  }
  for (int r = 0; r < G; ++r) {
    for (int64_t l = 0; i + l < k; ++l)
      acc[r][l] += x[r * k + i + l] * w[i + l];
    for (int64_t width = kLanes / 2; width > 0; width /= 2) {
      for (int64_t l = 0; l < width; ++l) acc[r][l] += acc[r][l + width];
    }
    out[r] = acc[r][0];
  }
}

}  // namespace

// Compiled for AVX-512, AVX2 and baseline x86-64; the loader picks the best
// the CPU has (GCC function multi-versioning). Not under ThreadSanitizer,
// whose instrumented ifunc resolver would run before its runtime starts.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2,fma", "default")))
#endif
void SkinnyGemmBaseline(const float* x, const float* w, float* y,
                        int64_t rows,
                   int64_t n, int64_t k, int64_t n_begin, int64_t n_end) {
  float dots[kGroup];
  for (int64_t j = n_begin; j < n_end; ++j) {
    const float* wj = w + j * k;  // stays in L1 while the groups reuse it
    for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
      const float* xr = x + r0 * k;
      const int64_t g = std::min<int64_t>(kGroup, rows - r0);
      switch (g) {
        case 4:
          DotGroup<4>(xr, k, wj, dots);
          break;
        case 3:
          DotGroup<3>(xr, k, wj, dots);
          break;
        case 2:
          DotGroup<2>(xr, k, wj, dots);
          break;
        default:
          DotGroup<1>(xr, k, wj, dots);
          break;
      }
      for (int64_t r = 0; r < g; ++r) y[(r0 + r) * n + j] = dots[r];
    }
  }
}

}  // namespace h3::bench
