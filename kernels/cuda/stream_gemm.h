#ifndef H3_KERNELS_CUDA_STREAM_GEMM_H_
#define H3_KERNELS_CUDA_STREAM_GEMM_H_

#include <cuda_runtime_api.h>

#include "kernels/cuda/launch_order.h"
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

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_STREAM_GEMM_H_
