// The one file that chooses between the CUDA and the CPU-only build for
// device discovery; everything CUDA lives in engine/cuda/.
#include "engine/devices.h"

#if H3_WITH_CUDA
#include "engine/cuda/cuda_devices.h"
#endif

namespace h3::engine {

CudaInventory ListCudaDevices() {
#if H3_WITH_CUDA
  return cuda::ListDevices();
#else
  CudaInventory inventory;
  inventory.no_device_reason =
      "this h3 was built without CUDA (H3_WITH_CUDA=OFF); rebuild with the "
      "CUDA Toolkit installed to use a GPU";
  return inventory;
#endif
}

absl::StatusOr<double> SelfTestDevice(int index) {
#if H3_WITH_CUDA
  return cuda::SelfTest(index);
#else
  return absl::FailedPreconditionError(
      "this h3 was built without CUDA (H3_WITH_CUDA=OFF)");
#endif
}

}  // namespace h3::engine
