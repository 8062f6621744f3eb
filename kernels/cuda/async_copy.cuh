#ifndef H3_KERNELS_CUDA_ASYNC_COPY_CUH_
#define H3_KERNELS_CUDA_ASYNC_COPY_CUH_

// Copies from global into shared memory that hold no register while in
// flight (PTX cp.async, compute capability 8.0 and later), for kernels
// that stream data they use once: a thread queues its copies, closes them
// into a group (CommitCopies) and waits until at most kPending of its
// groups are still in flight (WaitCopies); after the wait the thread
// reads what its own completed copies wrote (other threads' copies need a
// barrier too). The copies skip L1 where they can (16 bytes).
//
// Before 8.0 the copy is a plain load and store, done at once. On the CPU
// emulator (kernels/cuda/emulator/fibers.h) a copy happens at the wait, so
// shared memory read before it shows the wrong count.

#include <cuda_runtime.h>

#include <cstdint>

#if defined(H3_CUDA_EMULATOR)
#include "kernels/cuda/emulator/fibers.h"
#endif

namespace h3::kernels {

// kBytes (4, 8 or 16) from `global` to `shared`, both aligned to kBytes.
template <int kBytes>
__device__ __forceinline__ void CopyAsync(void* shared, const void* global) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16);
#if defined(H3_CUDA_EMULATOR)
  ::h3::emulator::AsyncCopy(shared, global, kBytes);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // No L2 eviction hint (.L2::cache_hint with an evict_first policy): on an
  // H200 the decode step took 49.7 us a layer at batch 64 with it against
  // 41.3 without, and the decode attention's copies with it stopped at an
  // illegal instruction (2026-11-27).
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                 "l"(global)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(dst),
                 "l"(global), "n"(kBytes)
                 : "memory");
  }
#else
  struct alignas(kBytes) Bytes {
    unsigned char b[kBytes];
  };
  *static_cast<Bytes*>(shared) = *static_cast<const Bytes*>(global);
#endif
}

// 16 bytes from `global` to `shared` as CopyAsync<16>, or where `copy` is
// false 16 zero bytes, in the same group and at the same wait (PTX
// cp.async's src-size 0: `global` is then not read, and may point past
// its buffer). One instruction either way, with no branch.
__device__ __forceinline__ void CopyAsync16OrZeros(void* shared,
                                                   const void* global,
                                                   bool copy) {
#if defined(H3_CUDA_EMULATOR)
  alignas(16) static const unsigned char kZeros[16] = {};
  ::h3::emulator::AsyncCopy(shared, copy ? global : kZeros, 16);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst),
               "l"(global), "r"(copy ? 16u : 0u)
               : "memory");
#else
  *static_cast<uint4*>(shared) =
      copy ? *static_cast<const uint4*>(global) : make_uint4(0, 0, 0, 0);
#endif
}

// Closes the thread's copies since the last call into one group (which may
// be empty: a pipeline commits one a step so that its wait count stays
// fixed).
__device__ __forceinline__ void CommitCopies() {
#if defined(H3_CUDA_EMULATOR)
  ::h3::emulator::AsyncCommit();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// Waits until at most kPending of the thread's committed groups are in
// flight (the older ones complete).
template <int kPending>
__device__ __forceinline__ void WaitCopies() {
#if defined(H3_CUDA_EMULATOR)
  ::h3::emulator::AsyncWait(kPending);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
#endif
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_ASYNC_COPY_CUH_
