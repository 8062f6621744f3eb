#ifndef H3_KERNELS_CUDA_STREAM_SPLIT_GEMM_H_
#define H3_KERNELS_CUDA_STREAM_SPLIT_GEMM_H_

#include <cuda_runtime_api.h>

#include "kernels/cuda/launch_order.h"
#include "kernels/stream_split_gemm.h"

namespace h3::kernels {

// The decode product of kernels/stream_split_gemm.h on tensor cores, in
// thread-block clusters (compute capability 9.0 and later): StreamGemmCuda's
// Params and rules (StreamGemmCheck(params, true)), pointers in device
// memory. Enqueues on `stream`; allocates nothing (graph-capturable).
// cudaErrorInvalidValue, with nothing enqueued, when StreamGemmCheck is not
// "" or n needs more than 65535 column blocks (a grid's y);
// cudaErrorNotSupported, with nothing enqueued, on a device before 9.0;
// empty outputs launch nothing. With LaunchOrder::kOverlapPrior it reads W
// before it waits for the kernel before (kernels/cuda/launch_order.h).
cudaError_t StreamSplitGemmCuda(const StreamGemmParams& params,
                                cudaStream_t stream,
                                LaunchOrder order = LaunchOrder::kAfterPrior);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_STREAM_SPLIT_GEMM_H_
