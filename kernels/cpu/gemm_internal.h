#ifndef H3_KERNELS_CPU_GEMM_INTERNAL_H_
#define H3_KERNELS_CPU_GEMM_INTERNAL_H_

// Internal to gemm*.cc: each instruction set's table of micro-kernels.
// REQUIRES: call an instruction set's Kernels() only where
// GemmIsaSupported says the CPU has it. Thread-safe.

#include "kernels/cpu/gemm_microkernel.h"

namespace h3::kernels {
namespace gemm_portable {
const gemm_internal::KernelTable& Kernels();
}  // namespace gemm_portable
#if defined(__x86_64__)
namespace gemm_avx2 {
const gemm_internal::KernelTable& Kernels();
}  // namespace gemm_avx2
namespace gemm_avx512 {
const gemm_internal::KernelTable& Kernels();
}  // namespace gemm_avx512
#endif
}  // namespace h3::kernels

#endif  // H3_KERNELS_CPU_GEMM_INTERNAL_H_
