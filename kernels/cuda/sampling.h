#ifndef H3_KERNELS_CUDA_SAMPLING_H_
#define H3_KERNELS_CUDA_SAMPLING_H_

// Token sampling on the GPU: the GPU twin of SampleCpu (kernels/sampling.h).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/launch_order.h"
#include "kernels/sampling.h"

namespace h3::kernels {

// The scratch SampleCuda needs for `batch` rows of `vocab_size` tokens (the
// processed logits and their weights, 8 bytes a token, and 24 bytes for
// every 4096 tokens of a row).
size_t SampleWorkspaceBytes(int batch, int32_t vocab_size);

// Same Params as SampleCpu; every pointer in device memory (including the
// `rows` and `histories` arrays and the counts and flags these point to).
// Enqueues on `stream`; allocates nothing (graph-capturable). Like
// SampleCpu, adds each chosen id to its row's counts (step 7).
// The same ids as SampleCpu except where float rounding moves a top_p or draw
// boundary (weights under 2^-39 of the most likely token's never win the
// draw); greedy rows always the same; the same ids from run to run.
// InvalidValue if the workspace is null, not 8-byte aligned or smaller than
// SampleWorkspaceBytes, if logits, rows or ids is null, or for a batch
// outside [0, 65535], vocab_size outside [1, 2^24] or row_stride <
// vocab_size.
// `order`: kernels/cuda/launch_order.h.
cudaError_t SampleCuda(const SampleParams& params, void* workspace,
                       size_t workspace_bytes, cudaStream_t stream,
                       LaunchOrder order = LaunchOrder::kAfterPrior);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_SAMPLING_H_
