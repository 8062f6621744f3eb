#ifndef H3_KERNELS_CUDA_SKINNY_GEMM_H_
#define H3_KERNELS_CUDA_SKINNY_GEMM_H_

#include <cuda_runtime_api.h>

#include "kernels/skinny_gemm.h"

namespace h3::kernels {

// The GPU twin of SkinnyGemmEmulation (kernels/skinny_gemm.h): the same
// Params, pointers in device memory, the same bits. Enqueues on `stream`;
// allocates nothing (graph-capturable). cudaErrorInvalidValue, with nothing
// enqueued, when SkinnyGemmCheck(params) is not "". Empty outputs launch
// nothing.
cudaError_t SkinnyGemmCuda(const SkinnyGemmParams& params, cudaStream_t stream);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_SKINNY_GEMM_H_
