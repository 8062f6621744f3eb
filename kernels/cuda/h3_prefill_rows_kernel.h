#ifndef H3_KERNELS_CUDA_H3_PREFILL_ROWS_KERNEL_H_
#define H3_KERNELS_CUDA_H3_PREFILL_ROWS_KERNEL_H_

// The chunked H3 prefill on packed rows (h3_prefill_rows_kernel.cu): the
// chunked kernel's algorithm (kernels/h3_chunked.h) reading q, k and v
// straight from token-major rows (the q|k|v product's [R, 3d]) and writing
// out's rows ([R, d]), with no transposes around it. A warp computes one
// channel; a block, kRowChannels adjacent channels of one segment, whose
// rows it stages through shared memory 16 bytes at a time. nvcc only (C++17).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/element_type.h"
#include "kernels/cuda/h3_prefill_fused_kernel.h"
#include "kernels/flashconv_setup.h"
#include "kernels/h3.h"
#include "kernels/h3_chunked.h"
#include "kernels/h3_prefill_packing.h"

namespace h3::kernels::chunked {

constexpr int kRowChannels = 8;  // channels a block, a warp each
constexpr int kRowThreads = 32 * kRowChannels;

// One launch: up to kMaxPackedSegments segments (blockIdx.y) of a packed
// call, kRowChannels channels a block (blockIdx.x: channels 8 x .. 8 x + 7).
// A segment's offset is its first row: token t, channel c of q is at
// q[(offset + t) * in_stride + c], of out at out[(offset + t) * out_stride
// + c]. Pointers and strides are 16-byte aligned (RowsFit).
struct RowsArgs {
  H3Weights w;                           // device
  const flashconv::ChannelSetup* setup;  // [H]: P, E, dA^16, scales
  const ChunkedChannel* toeplitz;        // [H]: T
  int64_t in_stride;                     // elements between rows of q, k, v
  int64_t out_stride;                    // ... of out
  const void* q;
  const void* k;
  const void* v;
  void* out;
  flashconv::BlockSegment seg[kMaxPackedSegments];  // [gridDim.y]
};
static_assert(sizeof(RowsArgs) <= 4096, "kernel parameters over 4 KB");

// Launches the kernel for the element type (fp32, fp16, else bf16) and
// shift_mma (the shift convolution on tensor cores in registers,
// h3_rows_shift_mma.cuh; else in fp32) over a's first `segments` segments on
// `stream`: grid (d_model / kRowChannels, segments), kRowThreads threads,
// RowsSharedBytes of dynamic shared memory (over 48 KB: the host raises
// the kernels' limits once, RowsKernelSetUp). The launch's error.
cudaError_t LaunchRows(ElementType type, bool shift_mma, const RowsArgs& args,
                       unsigned segments, cudaStream_t stream);
// The same for both shift convolutions.
int RowsSharedBytes(ElementType type);
// The current device's most shared memory a block can have
// (*max_shared_bytes), and every instance that fits in it raised to what
// it needs; the runtime's error if it refuses. An instance needing more
// (every one on compute capability 8.6 and 8.9) must not be launched.
cudaError_t RowsKernelSetUp(int* max_shared_bytes);

}  // namespace h3::kernels::chunked

#endif  // H3_KERNELS_CUDA_H3_PREFILL_ROWS_KERNEL_H_
