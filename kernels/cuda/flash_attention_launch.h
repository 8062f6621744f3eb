#ifndef H3_KERNELS_CUDA_FLASH_ATTENTION_LAUNCH_H_
#define H3_KERNELS_CUDA_FLASH_ATTENTION_LAUNCH_H_

// Between the host entry (flash_attention.cu) and the kernel instances
// (flash_attention_f16.cu, flash_attention_bf16.cu): the arguments of one
// launch, passed by value so that no descriptor array has to reach the
// device first.

#include <cuda_runtime_api.h>

#include "base/element_type.h"
#include "kernels/attention.h"
#include "kernels/flash_attention.h"

namespace h3::kernels::flash {

struct LaunchArgs {
  AttentionShape shape;
  const void* qkv = nullptr;        // [rows, 3, heads, head_dim] of io_type
  const float* inv_freq = nullptr;  // null without rotary
  void* out = nullptr;              // [rows, heads * head_dim] of io_type
  ElementType io_type = ElementType::kF32;  // kF32 or the operand type
  float scale_log2 = 0;                     // ScoreScaleLog2(head_dim)
  int count = 0;                            // sequences in seqs
  int64_t max_length = 0;                   // the longest chunk among them
  Sequence seqs[kMaxSequencesPerLaunch];
};
static_assert(sizeof(LaunchArgs) <= 4096, "kernel parameters are <= 4 KiB");

// The attention kernel for one launch's sequences (their caches already
// hold the chunks' keys and values). head_dim 64 or 128.
cudaError_t LaunchF16(const LaunchArgs& args, cudaStream_t stream);
cudaError_t LaunchBf16(const LaunchArgs& args, cudaStream_t stream);

}  // namespace h3::kernels::flash

#endif  // H3_KERNELS_CUDA_FLASH_ATTENTION_LAUNCH_H_
