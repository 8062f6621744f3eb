#ifndef H3_KERNELS_CUDA_BIAS_GELU_H_
#define H3_KERNELS_CUDA_BIAS_GELU_H_

#include <cuda_runtime_api.h>

#include "kernels/bias_gelu.h"

namespace h3::kernels {

// GPU twin of BiasGeluCpu: same Params, pointers in device memory.
// Enqueues on `stream` and returns the launch error, if any (the kernel's own
// errors surface at the next synchronisation). Empty tensors launch nothing.
cudaError_t BiasGeluCuda(const BiasGeluParams& params, cudaStream_t stream);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_BIAS_GELU_H_
