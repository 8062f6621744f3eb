#ifndef H3_KERNELS_CUDA_STREAM_GEMM_H_
#define H3_KERNELS_CUDA_STREAM_GEMM_H_

#include <cuda_runtime_api.h>

#include "kernels/cuda/launch_order.h"
#include "kernels/layer_norm.h"
#include "kernels/stream_gemm.h"

namespace h3::kernels {

// The decode product of kernels/stream_gemm.h on tensor cores (sm_80 and
// later): the same Params, pointers in device memory. Enqueues on `stream`;
// allocates nothing (graph-capturable). cudaErrorInvalidValue, with nothing
// enqueued, when StreamGemmCheck(params, true) is not ""; empty outputs
// launch nothing. With LaunchOrder::kOverlapPrior it reads W before it
// waits for the kernel before (kernels/cuda/launch_order.h).
cudaError_t StreamGemmCuda(const StreamGemmParams& params, cudaStream_t stream,
                           LaunchOrder order = LaunchOrder::kAfterPrior);

// How StreamGemmCuda builds its kernel for `rows` rows of x of W's type
// (x_half) and a grid of `blocks` (n / 16 rounded up) on `sms`
// multiprocessors: the blocks a multiprocessor it must fit (min_blocks,
// through __launch_bounds__) and the steps a warp loads ahead (unroll). For
// one row tile (at most 8 rows), so that the grid runs in one wave:
//   - fits 3 a multiprocessor but not 2 (the 1.3B q|k|v: 384 blocks on
//     132): 3 blocks, 2 steps ahead;
//   - fits 4 but not 3 (fc1: 512 blocks): 4 blocks, 1 step ahead.
// Otherwise {0, 0}: the default instances (the registers decide; one tile
// loads 4 steps ahead, 2 blocks a multiprocessor). The sums, and so the
// bits, are the same in every instance. (A third band, 8 steps ahead in one
// block a multiprocessor for grids of at most one a multiprocessor over k
// >= 4096, was measured and dropped: docs/cuda-engine.md.)
struct StreamGemmFit {
  int min_blocks = 0;
  int unroll = 0;
  // (nvcc compiles this header as C++17: no defaulted comparison.)
  constexpr bool operator==(const StreamGemmFit& o) const {
    return min_blocks == o.min_blocks && unroll == o.unroll;
  }
};
constexpr StreamGemmFit StreamGemmFitFor(int64_t rows, bool x_half,
                                         int64_t blocks, int64_t sms) {
  if (rows > 8 || !x_half) return {};
  if (blocks > 2 * sms && blocks <= 3 * sms) return {3, 2};
  if (blocks > 3 * sms && blocks <= 4 * sms) return {4, 1};
  return {};
}

// The product of a decode step's first rows after their norm, in one kernel
// (stream_gemm_norm.cu): AddLayerNormCuda(norm), then StreamGemmCuda(product)
// on the norm's output, except that every block norms the rows itself
// (AddLayerNormCuda's arithmetic: the same bits), keeps them in shared
// memory as x and writes its slice of norm.residual; norm.out is not
// written. For rows up to kNormStreamMaxRows of up to kNormStreamMaxCols.
// Slower than the two kernels on an H200, so the engine does not call it
// (docs/cuda-engine.md, "The norm inside the product"); h3_linear_bench
// times it (fused_norm).
constexpr int64_t kNormStreamMaxRows = 4;
constexpr int64_t kNormStreamMaxCols = 4096;

// "" when AddNormStreamGemmCuda takes the pair, else why not: norm.rows ==
// product.rows in [1, kNormStreamMaxRows]; norm.cols == product.k <=
// kNormStreamMaxCols; product.x == norm.out and product.x_type ==
// norm.out_type == product.w_type; product.n >= 1; x, residual, gamma,
// beta set, and residual_in when adding, which must not overlap residual
// (other blocks still read it); residual overlaps neither norm.x nor
// product.y, and product.y neither norm.x nor (adding) residual_in.
const char* AddNormStreamGemmCheck(const AddLayerNormParams& norm,
                                   const StreamGemmParams& product);

// cudaErrorNotSupported, with nothing enqueued, when AddNormStreamGemmCheck
// is not "" (the caller runs the two ops apart); otherwise as StreamGemmCuda
// on `product`, `order` included (the norm's parameters and the first W
// rows, into L2, come before the wait).
cudaError_t AddNormStreamGemmCuda(const AddLayerNormParams& norm,
                                  const StreamGemmParams& product,
                                  cudaStream_t stream,
                                  LaunchOrder order = LaunchOrder::kAfterPrior);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_STREAM_GEMM_H_
