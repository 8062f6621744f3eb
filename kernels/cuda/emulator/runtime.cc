// The part of the CUDA runtime API that host code run on the CPU emulator
// calls, over host memory: device memory is malloc'd, copies and sets are
// memcpy and memset, streams run everything at once (LaunchInOrder runs a
// kernel before it returns, kernels/cuda/launch_order.cuh), the one device
// is the emulator's H100 (device.h). Linked into the emulated tests in
// place of libcudart, so no call reaches a driver; a call this file lacks
// fails to link, which is the signal to add it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/emulator/fibers.h"

namespace {

constexpr size_t kAlign = 256;  // as cudaMalloc's

cudaError_t g_last = cudaSuccess;

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (*p == nullptr && bytes > 0) return g_last = cudaErrorMemoryAllocation;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes,
                       cudaMemcpyKind /*kind*/) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t /*stream*/) {
  return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (bytes > 0) std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : (g_last = cudaErrorInvalidDevice);
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute,
                                   int device) {
  if (device != 0) return g_last = cudaErrorInvalidDevice;
  // An H100's (kernels/cuda/device_major.h asks through this).
  switch (attribute) {
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = h3::emulator::kMultiProcessors;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(h3::emulator::kMaxDynamicShared);
      return cudaSuccess;
    default:
      return g_last = cudaErrorInvalidValue;
  }
}

// Every kernel is "built" for the emulated device: compute capability 9.0.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes,
                                  const void* /*func*/) {
  *attributes = cudaFuncAttributes{};
  attributes->ptxVersion = 90;
  attributes->binaryVersion = 90;
  return cudaSuccess;
}

// The dynamic shared memory opt-in, up to the H100's 227 KiB (the static
// shared memory it must leave room for is not known here); other
// attributes are accepted and ignored.
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attribute,
                                 int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) {
    return cudaSuccess;
  }
  if (value < 0 ||
      static_cast<size_t>(value) > h3::emulator::kMaxDynamicShared) {
    return g_last = cudaErrorInvalidValue;
  }
  h3::emulator::SetDynamicSharedLimit(func, static_cast<size_t>(value));
  return cudaSuccess;
}

// Occupancy by the emulated H100's threads and shared memory alone: the
// emulator knows neither a kernel's registers nor its static shared memory
// (docs/cuda-emulator.md), so a GPU may hold fewer blocks than this says.
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks,
                                                          const void* /*func*/,
                                                          int block_size,
                                                          size_t shared) {
  namespace e = h3::emulator;
  if (block_size <= 0 ||
      block_size > static_cast<int>(e::kMaxThreadsPerBlock) ||
      shared > e::kMaxDynamicShared) {
    return g_last = cudaErrorInvalidValue;
  }
  const int by_threads =
      e::kThreadsPerMultiprocessor / ((block_size + 31) / 32 * 32);
  const int by_shared = static_cast<int>(e::kSharedPerMultiprocessor /
                                         (shared + e::kSharedReservedPerBlock));
  *blocks = std::min({by_threads, by_shared, e::kBlocksPerMultiprocessor});
  return cudaSuccess;
}

// Clusters of the launch's cluster size (its
// cudaLaunchAttributeClusterDimension, else 1) that fit at once, as if every
// multiprocessor were in one GPC.
cudaError_t cudaOccupancyMaxActiveClusters(int* clusters, const void* func,
                                           const cudaLaunchConfig_t* config) {
  int size = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      const auto& d = config->attrs[i].val.clusterDim;
      size = static_cast<int>(d.x * d.y * d.z);
    }
  }
  if (size < 1 || size > 8) return g_last = cudaErrorInvalidValue;
  int per_multiprocessor = 0;
  if (const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_multiprocessor, func,
          static_cast<int>(config->blockDim.x * config->blockDim.y *
                           config->blockDim.z),
          config->dynamicSmemBytes);
      err != cudaSuccess) {
    return err;
  }
  *clusters = per_multiprocessor * h3::emulator::kMultiProcessors / size;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaGetLastError() {
  const cudaError_t last = g_last;
  g_last = cudaSuccess;
  return last;
}

const char* cudaGetErrorString(cudaError_t error) {
  static thread_local char text[48];
  std::snprintf(text, sizeof text, "CUDA error %d (the emulator's runtime)",
                static_cast<int>(error));
  return text;
}

}  // extern "C"
