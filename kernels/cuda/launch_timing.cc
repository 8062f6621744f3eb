// Run-time timing of launches (kernels/cuda/launch_timing.h).
#include "kernels/cuda/launch_timing.h"

#include <algorithm>
#include <vector>

#include "kernels/cuda/cuda_error.h"

namespace h3::kernels {
namespace {

// CUDA events destroyed with their scope.
struct Events {
  explicit Events(size_t count) : events(count, nullptr) {}
  ~Events() {
    for (cudaEvent_t e : events) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  cudaError_t Create() {
    for (cudaEvent_t& e : events) {
      if (const cudaError_t err = cudaEventCreate(&e); err != cudaSuccess) {
        return err;
      }
    }
    return cudaSuccess;
  }
  std::vector<cudaEvent_t> events;
};

}  // namespace

DeviceBuffer L2FlushBuffer() {
  DeviceBuffer flush;
  int device = 0, l2 = 0;
  size_t free_bytes = 0, total = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) !=
          cudaSuccess ||
      cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    cudaGetLastError();
    return flush;
  }
  const size_t bytes = 2 * static_cast<size_t>(l2);
  if (4 * bytes <= free_bytes && flush.Reserve(bytes) != cudaSuccess) {
    cudaGetLastError();
  }
  return flush;
}

std::string MedianLaunchMs(cudaStream_t stream, const DeviceBuffer& flush,
                           const std::function<bool()>& launch,
                           float* median_ms) {
  *median_ms = -1.0f;
  constexpr int kCalls = kLaunchTimingReps + 1;  // the first untimed
  Events timing(2 * kCalls);
  H3_RETURN_IF_NOT_EMPTY(CudaError(timing.Create(), "cudaEventCreate"));
  for (int r = 0; r < kCalls; ++r) {
    if (flush.bytes() > 0) {
      H3_RETURN_IF_NOT_EMPTY(
          CudaError(cudaMemsetAsync(flush.get(), r, flush.bytes(), stream),
                    "cudaMemsetAsync (L2 flush)"));
    }
    H3_RETURN_IF_NOT_EMPTY(CudaError(
        cudaEventRecord(timing.events[2 * r], stream), "cudaEventRecord"));
    if (!launch()) {
      // A refusal: wait for what was enqueued before the events go.
      return CudaError(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    H3_RETURN_IF_NOT_EMPTY(CudaError(
        cudaEventRecord(timing.events[2 * r + 1], stream), "cudaEventRecord"));
  }
  H3_RETURN_IF_NOT_EMPTY(
      CudaError(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
  std::vector<float> ms(kLaunchTimingReps);
  for (int r = 1; r < kCalls; ++r) {
    H3_RETURN_IF_NOT_EMPTY(
        CudaError(cudaEventElapsedTime(&ms[r - 1], timing.events[2 * r],
                                       timing.events[2 * r + 1]),
                  "cudaEventElapsedTime"));
  }
  std::nth_element(ms.begin(), ms.begin() + kLaunchTimingReps / 2, ms.end());
  *median_ms = ms[kLaunchTimingReps / 2];
  return "";
}

}  // namespace h3::kernels
