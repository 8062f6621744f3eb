#ifndef H3_KERNELS_CUDA_PREFETCH_CUH_
#define H3_KERNELS_CUDA_PREFETCH_CUH_

// A hint to the memory system: the 128-byte line holding `address` fetched
// into L2 (PTX prefetch.global.L2), holding no register once sent. The
// kernels send it ahead of loads that would otherwise each wait on HBM in
// turn. Nothing on the CPU emulator, which has no cache to fill.

namespace h3::kernels {

__device__ __forceinline__ void PrefetchL2(const void* address) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(address));
#else
  (void)address;
#endif
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_PREFETCH_CUH_
