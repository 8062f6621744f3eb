#ifndef H3_BENCH_SKINNY_GEMM_BASELINE_H_
#define H3_BENCH_SKINNY_GEMM_BASELINE_H_

#include <cstdint>

namespace h3::bench {

// A frozen copy of the CPU backend's former decode kernel
// (kernels/cpu/skinny_gemm.cc, replaced by kernels/cpu/gemm.h), kept only as
// h3_gemm_bench's yardstick for few rows. y = x W^T over output columns
// [n_begin, n_end), W [n, k] unpacked; single-threaded.
// REQUIRES: x [rows, k], w [n, k], y [rows, n], row-major and contiguous; y
// overlaps neither; 0 <= n_begin <= n_end <= n.
void SkinnyGemmBaseline(const float* x, const float* w, float* y, int64_t rows,
                        int64_t n, int64_t k, int64_t n_begin, int64_t n_end);

}  // namespace h3::bench

#endif  // H3_BENCH_SKINNY_GEMM_BASELINE_H_
