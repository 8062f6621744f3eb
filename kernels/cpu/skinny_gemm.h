#ifndef H3_KERNELS_CPU_SKINNY_GEMM_H_
#define H3_KERNELS_CPU_SKINNY_GEMM_H_

#include <cstdint>

namespace h3::kernels {

// y = x W^T for few rows (decoding: one row per sequence of a batch), where
// a general SGEMM spends most of its time re-packing W on every call. Reads
// W exactly once, streaming, and keeps x in cache: the work is bound by
// memory bandwidth, as decoding is.
//
// REQUIRES: x [rows, k], w [n, k], y [rows, n], row-major and contiguous; y
// does not overlap x or w; rows, n, k >= 0. Each output is one dot product
// summed in a fixed order, so a row's result does not depend on the other
// rows (a sequence's logits do not depend on its batch).
//
// The CPU backend uses it up to kSkinnyGemmMaxRows rows, so decoding up to
// that many sequences at once is batch-invariant: a seeded request samples
// the same tokens alone or in a full batch.
inline constexpr int64_t kSkinnyGemmMaxRows = 64;

// Single-threaded over output columns [n_begin, n_end); callers split n.
void SkinnyGemmCpu(const float* x, const float* w, float* y, int64_t rows,
                   int64_t n, int64_t k, int64_t n_begin, int64_t n_end);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CPU_SKINNY_GEMM_H_
