#ifndef H3_KERNELS_CUDA_EMULATOR_H3_PREFILL_CHUNKED_EMULATED_H_
#define H3_KERNELS_CUDA_EMULATOR_H3_PREFILL_CHUNKED_EMULATED_H_

// The channel-major chunked H3 prefill kernel
// (kernels/cuda/h3_prefill_chunked_kernel.cu, which ran on an H200) on the
// CPU emulator, for the tests of its packed-rows form.

#include <string>

#include "base/element_type.h"
#include "kernels/cuda/h3_prefill_chunked_kernel.h"

namespace h3::kernels::chunked {

// Runs ChunkedPrefillKernel<type, shift_mma> over a's first `segments`
// segments (grid segments x d_model, kThreads threads); "" or the
// emulator's error.
std::string RunChunkedPrefillEmulated(ElementType type, bool shift_mma,
                                      const ChunkedArgs& a, int segments);

}  // namespace h3::kernels::chunked

#endif  // H3_KERNELS_CUDA_EMULATOR_H3_PREFILL_CHUNKED_EMULATED_H_
