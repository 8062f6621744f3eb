#ifndef H3_ENGINE_DEVICES_H_
#define H3_ENGINE_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace h3::engine {

// One GPU as the CUDA runtime sees it.
struct DeviceInfo {
  int index = 0;
  std::string name;        // "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id;  // "0000:01:00.0"
  int compute_major = 0;   // 9 for Hopper
  int compute_minor = 0;
  int multiprocessors = 0;
  int64_t total_memory_bytes = 0;
  int64_t free_memory_bytes = 0;
  int64_t l2_cache_bytes = 0;
  int64_t shared_memory_per_block_optin_bytes = 0;
  bool supported = false;  // this build has machine code for its architecture
  // The architecture that code was compiled for (kernels/cuda/kernel_image.h,
  // CurrentImageArch: 90 for the default build's sm_90a on a 9.x device;
  // below 90 there, no overlapped launches or clusters); 0 if unsupported.
  int kernel_arch = 0;
  // The device and that image take 9.0's launches: --pdl on overlaps, the
  // cluster kernel (StreamSplitGemmCuda) runs (kernels::CurrentImageTakesSm90).
  bool overlap_and_clusters = false;
};

// What the CUDA runtime offers this process.
struct CudaInventory {
  bool built_with_cuda = false;  // false: a CPU-only build (H3_WITH_CUDA=OFF)
  int driver_version = 0;        // e.g. 13000 for CUDA 13.0; 0 if no driver
  int runtime_version = 0;       // the runtime linked in; 0 without CUDA
  std::vector<DeviceInfo> devices;
  // Why `devices` is empty, in words a person can act on; empty otherwise.
  std::string no_device_reason;
};

// Lists the GPUs. Having no GPU, no driver or no CUDA in the build is not an
// error: the inventory says so in no_device_reason. Thread-safe.
CudaInventory ListCudaDevices();

// Runs a small kernel (bias + GELU) on device `index` and compares it with its
// CPU twin: proves that this binary's machine code loads and computes on that
// device. Returns the largest relative error seen. FailedPrecondition without
// CUDA, InvalidArgument for a bad index, Internal (with the CUDA error and
// file:line) when the device fails, DataLoss on a wrong result.
absl::StatusOr<double> SelfTestDevice(int index);

}  // namespace h3::engine

#endif  // H3_ENGINE_DEVICES_H_
