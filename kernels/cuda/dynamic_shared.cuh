#ifndef H3_KERNELS_CUDA_DYNAMIC_SHARED_CUH_
#define H3_KERNELS_CUDA_DYNAMIC_SHARED_CUH_

// H3_DYNAMIC_SHARED(type, name, align) declares `name`, the block's dynamic
// shared memory as an array of `type` aligned to `align` bytes: nvcc's
// `extern __shared__` array, or, where the CPU emulator runs the kernel
// (kernels/cuda/emulator/device.h), a pointer to the buffer it gives the
// block. Either indexes and converts as an array does.

#if defined(H3_CUDA_EMULATOR)
#include "kernels/cuda/emulator/fibers.h"
#define H3_DYNAMIC_SHARED(type, name, align)                    \
  type* const name = static_cast<type*>(                        \
      ::h3::emulator::DynamicShared(static_cast<size_t>(align)))
#else
#define H3_DYNAMIC_SHARED(type, name, align) \
  extern __shared__ __align__(align) type name[]
#endif

#endif  // H3_KERNELS_CUDA_DYNAMIC_SHARED_CUH_
