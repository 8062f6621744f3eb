#ifndef H3_KERNELS_CUDA_H3_PREFILL_CHUNKED_KERNEL_H_
#define H3_KERNELS_CUDA_H3_PREFILL_CHUNKED_KERNEL_H_

// The chunked H3 prefill kernel's parameters (h3_prefill_chunked_kernel.cu
// holds the kernel, kernels/h3_chunked.h its algorithm, h3_prefill_chunked.cu
// the host side). nvcc only (C++17).

#include <cuda_runtime_api.h>

#include "base/element_type.h"
#include "kernels/cuda/h3_prefill_fused_kernel.h"
#include "kernels/flashconv_setup.h"
#include "kernels/h3.h"
#include "kernels/h3_chunked.h"
#include "kernels/h3_prefill_packing.h"

namespace h3::kernels::chunked {

constexpr int kThreads = 128;  // 4 warps a block

// One launch: up to kMaxPackedSegments segments (blockIdx.x) of a packed
// call, every channel (blockIdx.y); the segment table travels in the
// kernel's parameters (__grid_constant__), as the fused kernel's does.
struct ChunkedArgs {
  H3Weights w;                           // device
  const flashconv::ChannelSetup* setup;  // [H]: P, E, dA^16, scales
  const ChunkedChannel* toeplitz;        // [H]: T
  int64_t channel;                       // channel stride; time 1
  const void* q;
  const void* k;
  const void* v;
  void* out;
  flashconv::BlockSegment seg[kMaxPackedSegments];  // [gridDim.x]
};
static_assert(sizeof(ChunkedArgs) <= 4096, "kernel parameters over 4 KB");

// Launches ChunkedPrefillKernel<T, shift_mma> for the element type (fp32,
// fp16, else bf16; shift_mma: the shift convolution on tensor cores,
// kernels/h3_chunked.h) over a's first `segments` segments on `stream`:
// grid (segments, d_model), kThreads threads, static shared memory. The
// launch's error.
cudaError_t LaunchChunkedPrefill(ElementType type, bool shift_mma,
                                 const ChunkedArgs& args, unsigned segments,
                                 cudaStream_t stream);

}  // namespace h3::kernels::chunked

#endif  // H3_KERNELS_CUDA_H3_PREFILL_CHUNKED_KERNEL_H_
