#ifndef H3_KERNELS_CUDA_LAUNCH_ORDER_CUH_
#define H3_KERNELS_CUDA_LAUNCH_ORDER_CUH_

// Launches in a LaunchOrder (kernels/cuda/launch_order.h), and the two
// device calls a kernel launched with kOverlapPrior makes. Both compile to
// nothing before sm_90, where the launch falls back to kAfterPrior.

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/kernel_image.h"
#include "kernels/cuda/launch_order.h"

namespace h3::kernels {

// Blocks the calling thread until the kernels this one was launched after
// have finished and their writes are visible; returns at once when the
// launch was kAfterPrior. A kernel launched with kOverlapPrior calls it in
// every thread before its first read of anything a kernel writes and before
// its first global write.
__device__ __forceinline__ void WaitForPriorKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel on the stream, if it was launched with
// kOverlapPrior, start once every block of this kernel has called this (or
// exited). Orders no memory: the next kernel still waits for this one to
// finish before it reads what this one writes.
__device__ __forceinline__ void LetNextKernelStart() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether the current device takes kOverlapPrior (compute capability 9.0
// or later, and our kernels compiled for it: an image built for 8.0 has
// no griddepcontrol, and would read the kernel before's output early);
// false when the runtime cannot tell.
inline bool OverlapSupported() { return CurrentImageTakesSm90(); }

// kernel<<<grid, block, shared, stream>>>(args...) in `order`, its blocks
// in thread-block clusters of `cluster` blocks along x when `cluster` is not
// 0 (compute capability 9.0 and later; the caller checks; grid.x a multiple
// of it); the launch's error, if any (or an earlier one the runtime still
// holds), which it clears.
template <typename... Params, typename... Args>
cudaError_t LaunchClustersInOrder(LaunchOrder order, unsigned cluster,
                                  void (*kernel)(Params...), dim3 grid,
                                  dim3 block, size_t shared,
                                  cudaStream_t stream, Args&&... args) {
#if defined(H3_CUDA_EMULATOR)
  // On the CPU emulator (kernels/cuda/emulator/fibers.h): the kernel runs
  // before this returns, in stream order whatever `order` asks.
  (void)order;
  (void)stream;
  return ::h3::emulator::Run(
             grid, block, shared, [&] { kernel(args...); },
             ::h3::emulator::DefaultOrder(), cluster == 0 ? 1 : cluster,
             reinterpret_cast<const void*>(kernel)) == ""
             ? cudaSuccess
             : cudaErrorLaunchFailure;
#else
  cudaLaunchAttribute attributes[2];
  unsigned count = 0;
  if (order == LaunchOrder::kOverlapPrior && OverlapSupported()) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (cluster != 0) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = count > 0 ? attributes : nullptr;
  config.numAttrs = count;
  // As kernel<<<...>>>(...); cudaGetLastError(): the launch's error, and
  // the runtime's last error cleared.
  const cudaError_t err =
      cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  const cudaError_t last = cudaGetLastError();
  return err != cudaSuccess ? err : last;
#endif
}

// The same without clusters.
template <typename... Params, typename... Args>
cudaError_t LaunchInOrder(LaunchOrder order, void (*kernel)(Params...),
                          dim3 grid, dim3 block, size_t shared,
                          cudaStream_t stream, Args&&... args) {
  return LaunchClustersInOrder(order, 0, kernel, grid, block, shared, stream,
                               std::forward<Args>(args)...);
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_LAUNCH_ORDER_CUH_
