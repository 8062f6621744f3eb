#ifndef H3_KERNELS_CUDA_H3_PREFILL_FUSED_KERNEL_H_
#define H3_KERNELS_CUDA_H3_PREFILL_FUSED_KERNEL_H_

// The fused H3 prefill kernel's parameters (h3_prefill_fused_kernel.cu holds
// the kernel and its algorithm, h3_prefill_fused.cu the host side that fills
// them). nvcc only (C++17).

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/element_type.h"
#include "kernels/flashconv_setup.h"
#include "kernels/h3.h"
#include "kernels/h3_prefill_packing.h"

namespace h3::kernels::flashconv {

// Per-model tables of one FFT size n = n1 * n2, chunk = n / 2 (computed at
// load: H3PrefillFused::Create, kernels/flashconv_setup.h).
struct SizeTables {
  const __half* f1 = nullptr;             // [2][n1][n1/2] W_n1^(k1 n1) / n1
  const __half* f2 = nullptr;             // [2][n2][n2]   W_n2^(n2 k2) / n2
  const float2* spectrum = nullptr;       // [H][n1][n2]   S[k1 + n1 k2] / scale
  const float* spectrum_scale = nullptr;  // [H]
  const float2* twiddle = nullptr;        // [n1][n2]      W_n^(k1 k2)
  // [H][kCarrySegments][M]: [c][g - 1][m] = dA^(g chunk / kCarrySegments)
  const float2* chunk_powers = nullptr;
};

// The segment of one row of blocks (blockIdx.x): H3PrefillSegment.
struct BlockSegment {
  int64_t start;  // the position of the segment's first token
  int64_t length;
  int64_t offset;      // elements from the tensors' base to (token 0, ch. 0)
  float* shift_state;  // [d, N]
  float* diag_state;   // [d, M] complex
};

// One launch: segments that share one FFT size, the time stride 1. The
// segment table travels in the kernel's parameters (__grid_constant__, read
// in place), so a launch needs no device memory and can be graph-captured.
struct KernelArgs {
  H3Weights w;
  SizeTables t;
  const ChannelSetup* setup;  // [H], computed at load
  int64_t channel;            // channel stride of q, k, v, out
  const void* q;
  const void* k;
  const void* v;
  void* out;
  BlockSegment seg[kMaxPackedSegments];  // [gridDim.x]
};

// CUDA's classic limit on a kernel's parameters.
static_assert(sizeof(KernelArgs) <= 4096, "kernel parameters over 4 KB");

// FusedPrefillKernel<T, n1, n2> for the element type (fp32, fp16, else
// bf16) and kFftSizes[size_index]; launch it with one KernelArgs, kThreads
// threads and SharedMap(n).total bytes of dynamic shared memory.
void* FusedPrefillKernelFor(ElementType type, int size_index);

}  // namespace h3::kernels::flashconv

#endif  // H3_KERNELS_CUDA_H3_PREFILL_FUSED_KERNEL_H_
