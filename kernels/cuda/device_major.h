#ifndef H3_KERNELS_CUDA_DEVICE_MAJOR_H_
#define H3_KERNELS_CUDA_DEVICE_MAJOR_H_

// The current device's compute capability major and multiprocessor count,
// each asked of the runtime once per device and process: the host entries
// that choose or refuse a kernel by architecture, or size a grid by the
// device, call these on every launch outside graph capture.

#include <cuda_runtime_api.h>

#include <atomic>

namespace h3::kernels {

// cudaSuccess and *value, what ask(device, &answer) answers for the
// current device (cudaSuccess and an answer), or the runtime's error (then
// *value is untouched). A positive answer is kept per device and Ask type
// (each lambda its own cache), so `ask` runs once per device. Thread-safe.
template <typename Ask>
cudaError_t CachedPerDevice(Ask ask, int* value) {
  constexpr int kCached = 64;  // devices past this are asked every time
  static std::atomic<int> known[kCached] = {};  // 0: not yet asked
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) {
    return err;
  }
  const bool cached = device >= 0 && device < kCached;
  if (cached) {
    if (const int seen = known[device].load(std::memory_order_relaxed);
        seen > 0) {
      *value = seen;
      return cudaSuccess;
    }
  }
  int asked = 0;
  if (const cudaError_t err = ask(device, &asked); err != cudaSuccess) {
    return err;
  }
  if (cached && asked > 0) {
    known[device].store(asked, std::memory_order_relaxed);
  }
  *value = asked;
  return cudaSuccess;
}

// The attribute kAttribute (a positive number) of the current device.
template <cudaDeviceAttr kAttribute>
cudaError_t CachedDeviceAttribute(int* value) {
  return CachedPerDevice(
      [](int device, int* answer) {
        return cudaDeviceGetAttribute(answer, kAttribute, device);
      },
      value);
}

inline cudaError_t CurrentDeviceMajor(int* major) {
  return CachedDeviceAttribute<cudaDevAttrComputeCapabilityMajor>(major);
}

inline cudaError_t CurrentDeviceMultiprocessors(int* count) {
  return CachedDeviceAttribute<cudaDevAttrMultiProcessorCount>(count);
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_DEVICE_MAJOR_H_
