#ifndef H3_KERNELS_CUDA_SAMPLING_H_
#define H3_KERNELS_CUDA_SAMPLING_H_

// Token sampling on the GPU: the GPU twin of SampleCpu (kernels/sampling.h).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/sampling.h"

namespace h3::kernels {

size_t SampleWorkspaceBytes(int batch, int32_t vocab_size);

// Same Params as SampleCpu; every pointer in device memory (including the
// `rows` array). Enqueues on `stream`; allocates nothing (graph-capturable).
// InvalidValue if the workspace is smaller than SampleWorkspaceBytes.
cudaError_t SampleCuda(const SampleParams& params, void* workspace,
                       size_t workspace_bytes, cudaStream_t stream);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_SAMPLING_H_
