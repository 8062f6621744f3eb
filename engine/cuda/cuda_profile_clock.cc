// The CUDA backend's ProfileClock (engine/profiler.h): one event recorded on
// the backend's stream per mark, read after the stream has passed them.
#include <cuda_runtime_api.h>

#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"

namespace h3::engine::cuda {
namespace {

class CudaProfileClock final : public ProfileClock {
 public:
  explicit CudaProfileClock(cudaStream_t stream) : stream_(stream) {}
  ~CudaProfileClock() override {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }

  absl::Status Mark() override {
    // The events are reused from one Read to the next.
    if (used_ == events_.size()) {
      cudaEvent_t event = nullptr;
      H3_CUDA_RETURN_IF_ERROR(cudaEventCreate(&event));
      events_.push_back(event);
    }
    H3_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[used_], stream_));
    ++used_;
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<double>> Read() override {
    std::vector<double> ms(used_);
    const size_t used = used_;
    used_ = 0;
    if (used == 0) return ms;
    H3_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events_[used - 1]));
    for (size_t i = 1; i < used; ++i) {
      float elapsed = 0;
      H3_CUDA_RETURN_IF_ERROR(
          cudaEventElapsedTime(&elapsed, events_[0], events_[i]));
      ms[i] = elapsed;
    }
    return ms;
  }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
  size_t used_ = 0;  // events recorded since the last Read
};

}  // namespace

std::unique_ptr<ProfileClock> MakeCudaProfileClock(cudaStream_t stream) {
  return std::make_unique<CudaProfileClock>(stream);
}

}  // namespace h3::engine::cuda
