#ifndef H3_ENGINE_CUDA_CUDA_DEVICES_H_
#define H3_ENGINE_CUDA_CUDA_DEVICES_H_

#include "absl/status/statusor.h"
#include "engine/devices.h"

namespace h3::engine::cuda {

// CUDA implementations of ListCudaDevices and SelfTestDevice
// (engine/devices.h). Both leave the calling thread's current device as they
// found it.
CudaInventory ListDevices();
absl::StatusOr<double> SelfTest(int index);

}  // namespace h3::engine::cuda

#endif  // H3_ENGINE_CUDA_CUDA_DEVICES_H_
