#ifndef H3_KERNELS_CUDA_DEVICE_BUFFER_H_
#define H3_KERNELS_CUDA_DEVICE_BUFFER_H_

// An owned, growable allocation of device memory (cudaMalloc / cudaFree).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace h3::kernels {

// Whether `p` is a multiple of `bytes` (a power of two): what vector loads
// and stores of that width need.
inline bool Aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Makes the buffer hold at least `bytes`. Growing a non-empty buffer waits
  // for all work on the device (work already enqueued may still use the old
  // memory), frees it and loses the contents. On failure the error is
  // returned and the buffer may be left empty.
  cudaError_t Reserve(size_t bytes) {
    if (bytes <= bytes_) return cudaSuccess;
    if (ptr_ != nullptr) {
      cudaError_t err = cudaDeviceSynchronize();
      if (err != cudaSuccess) return err;
      err = cudaFree(ptr_);
      ptr_ = nullptr;
      bytes_ = 0;
      if (err != cudaSuccess) return err;
    }
    void* ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, bytes);
    if (err != cudaSuccess) return err;
    ptr_ = ptr;
    bytes_ = bytes;
    return cudaSuccess;
  }

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Makes `buf` hold host's bytes (grown to at least one element's room;
// synchronous).
template <typename T>
cudaError_t CopyToDevice(const std::vector<T>& host, DeviceBuffer* buf) {
  cudaError_t err = buf->Reserve(std::max<size_t>(host.size(), 1) * sizeof(T));
  if (err != cudaSuccess) return err;
  return cudaMemcpy(buf->get(), host.data(), host.size() * sizeof(T),
                    cudaMemcpyHostToDevice);
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_DEVICE_BUFFER_H_
