#ifndef H3_KERNELS_CUDA_TILE_GEMM_H_
#define H3_KERNELS_CUDA_TILE_GEMM_H_

#include <cuda_runtime_api.h>

#include "kernels/cuda/launch_order.h"
#include "kernels/tile_gemm.h"

namespace h3::kernels {

// The batch decode product of kernels/tile_gemm.h on tensor cores, in
// thread-block clusters (compute capability 9.0 and later): StreamGemmCuda's
// Params with x in W's type (TileGemmCheck(params, true)), pointers in
// device memory. Enqueues on `stream`; allocates nothing (graph-capturable;
// the first call on a device asks its occupancy, a host query).
// cudaErrorInvalidValue, with nothing enqueued, when TileGemmCheck is not
// "" or n needs more than 65535 column blocks (a grid's y);
// cudaErrorNotSupported, with nothing enqueued, on a device before 9.0;
// empty outputs launch nothing. With LaunchOrder::kOverlapPrior it copies
// its first steps of W before it waits for the kernel before.
cudaError_t TileGemmCuda(const StreamGemmParams& params, cudaStream_t stream,
                         LaunchOrder order = LaunchOrder::kAfterPrior);

// The shape TileGemmCuda gives a product of n columns and depth k on the
// current device (kernels/tile_gemm.h: TileGemmChooseShape, each width's
// device asked once), for benchmarks and tests;
// cudaErrorNotSupported before 9.0.
cudaError_t TileGemmCudaShape(int64_t n, int64_t k, TileGemmShape* shape);

// TileGemmCuda with k cut into `splits` shares instead of
// TileGemmChooseShape's, at its width (other bits, as the specification's
// at that count),
// for benchmarks that time the split counts and tests that check them.
// cudaErrorInvalidValue, with nothing enqueued, unless 1 <= splits <=
// kTileMaxSplits and splits <= ceil(k / kTileStep); a launch error where
// the device holds no cluster of that size.
cudaError_t TileGemmCudaSplits(const StreamGemmParams& params, int splits,
                               cudaStream_t stream,
                               LaunchOrder order = LaunchOrder::kAfterPrior);

// TileGemmCuda with blocks `cols` wide (kTileCols or kTileWideCols) and k
// cut into `splits` shares: for benchmarks that time the widths side by
// side, and tests that run both. The specification's bits at that split
// count, whatever the width. cudaErrorInvalidValue, with nothing enqueued,
// for another width or TileGemmCudaSplits's bad split counts.
cudaError_t TileGemmCudaCut(const StreamGemmParams& params, int cols,
                            int splits, cudaStream_t stream,
                            LaunchOrder order = LaunchOrder::kAfterPrior);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_TILE_GEMM_H_
