#ifndef H3_KERNELS_CUDA_FLASH_ATTENTION_H_
#define H3_KERNELS_CUDA_FLASH_ATTENTION_H_

// Prefill attention on tensor cores (kernels/flash_attention.h): the
// FlashAttention-2 algorithm with fp16 or bf16 mma.sync operands and fp32
// accumulation, for several sequences' chunks per call. sm_80 and newer.
//
// The fp32 kernel (kernels/cuda/attention.h) stays the checked default; this
// one is chosen by the backend's `flash_attention` option where
// FlashAttentionSupports says yes.

#include <cuda_runtime_api.h>

#include "base/element_type.h"
#include "kernels/attention.h"
#include "kernels/flash_attention.h"

namespace h3::kernels {

// Whether the kernel has an instance for this shape and operand type: head
// dim 64 or 128, fp16 or bf16, a valid rotary (even, <= head_dim).
bool FlashAttentionSupports(const AttentionShape& shape, ElementType type);

// Writes each sequence's rotated keys and values into its cache, then its
// outputs (kernels/flash_attention.h, Params). Every pointer except
// params.seqs (host memory) in device memory; caches, qkv and out 16-byte
// aligned. Returns:
//   cudaErrorInvalidValue: a sequence past its cache's capacity, negative
//     sizes, null pointers where there is work, fewer than 0 sequences;
//   cudaErrorNotSupported, before any launch: a shape or type
//     FlashAttentionSupports rejects, an io_type other than kF32 and the
//     operand type, a cache type other than kF32 and io_type (a 16-bit
//     cache is of the operand type: its tiles are copied, not rounded),
//     misaligned pointers, a device older than sm_80; the
//     caller falls back to AttentionPrefillCuda (any io_type);
//   or the launch's error.
cudaError_t FlashAttentionPrefillCuda(const flash::Params& params,
                                      cudaStream_t stream);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_FLASH_ATTENTION_H_
