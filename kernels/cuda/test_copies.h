#ifndef H3_KERNELS_CUDA_TEST_COPIES_H_
#define H3_KERNELS_CUDA_TEST_COPIES_H_

// Host <-> device copies of std::vectors for the kernels' GPU tests, and
// ASSERT_CUDA_OK, which prints the runtime's last error. Test support.

#include <cuda_runtime_api.h>

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

namespace h3::kernels {

// Makes `buf` hold host's bytes (at least one element's room).
template <typename T>
cudaError_t Upload(const std::vector<T>& host, DeviceBuffer* buf) {
  return CopyToDevice(host, buf);
}

// Fills all of *host (its size says how much) from the start of buf.
template <typename T>
cudaError_t Download(const DeviceBuffer& buf, std::vector<T>* host) {
  return cudaMemcpy(host->data(), buf.get(), host->size() * sizeof(T),
                    cudaMemcpyDeviceToHost);
}

// The first n elements of buf, on the host (a failed copy fails the test).
template <typename T>
std::vector<T> Fetch(const DeviceBuffer& buf, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(Download(buf, &host), cudaSuccess);
  return host;
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_TEST_COPIES_H_
