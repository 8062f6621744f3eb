#ifndef H3_KERNELS_CUDA_SHARED_MEMORY_CUH_
#define H3_KERNELS_CUDA_SHARED_MEMORY_CUH_

// Shared memory declared so that the CPU emulator
// (kernels/cuda/emulator/device.h) can run the kernel too:
//
// H3_DYNAMIC_SHARED(type, name, align) declares `name`, the block's dynamic
// shared memory as an array of `type` aligned to `align` bytes: nvcc's
// `extern __shared__` array, or a pointer to the buffer the emulator gives
// the block.
//
// H3_SHARED_ARRAY(type, name, count) declares a static __shared__ array of
// `count` elements: nvcc's, or a pointer to the emulator's copy of it for
// the running block. Plain static __shared__ variables work on the
// emulator too, but are one for all blocks, which is right only while
// blocks run one at a time: a kernel whose blocks form clusters (and read
// each other's shared memory) declares its arrays with this.
//
// Either indexes and converts as an array does.

#if defined(H3_CUDA_EMULATOR)
#include "kernels/cuda/emulator/fibers.h"
#define H3_DYNAMIC_SHARED(type, name, align) \
  type* const name = static_cast<type*>(     \
      ::h3::emulator::DynamicShared(static_cast<size_t>(align)))
#define H3_SHARED_ARRAY(type, name, count) \
  static char name##_tag = 0; /* unique */ \
  type* const name = static_cast<type*>(   \
      ::h3::emulator::BlockStatic(&name##_tag, sizeof(type) * (count)))
#else
#define H3_DYNAMIC_SHARED(type, name, align) \
  extern __shared__ __align__(align)         \
  type name[]
#define H3_SHARED_ARRAY(type, name, count) __shared__ type name[count]
#endif

#endif  // H3_KERNELS_CUDA_SHARED_MEMORY_CUH_
