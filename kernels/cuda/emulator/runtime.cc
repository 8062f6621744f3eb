// The part of the CUDA runtime API that host code run on the CPU emulator
// calls, over host memory: device memory is malloc'd, copies and sets are
// memcpy and memset, streams run everything at once (LaunchInOrder runs a
// kernel before it returns, kernels/cuda/launch_order.cuh), the one device
// is the emulator's H100 (device.h). Linked into the emulated tests in
// place of libcudart, so no call reaches a driver; a call this file lacks
// fails to link, which is the signal to add it.
#include <cuda_runtime_api.h>

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
