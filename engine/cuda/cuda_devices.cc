#include "engine/cuda/cuda_devices.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/bias_gelu.h"
#include "kernels/cuda/bias_gelu.h"
#include "kernels/cuda/kernel_image.h"

namespace h3::engine::cuda {
namespace {

// Restores the calling thread's current device when it goes out of scope.
class DeviceRestorer {
 public:
  DeviceRestorer() { has_ = cudaGetDevice(&device_) == cudaSuccess; }
  ~DeviceRestorer() {
    if (has_) cudaSetDevice(device_);
  }

 private:
  int device_ = 0;
  bool has_ = false;
};

absl::StatusOr<DeviceInfo> Describe(int index) {
  cudaDeviceProp prop;
  H3_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, index));
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  char bus_id[32] = {};
  H3_CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, index));
  info.pci_bus_id = bus_id;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.l2_cache_bytes = prop.l2CacheSize;
  info.shared_memory_per_block_optin_bytes =
      static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  H3_CUDA_RETURN_IF_ERROR(kernels::HasKernelImage(index, &info.supported));
  H3_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));  // cudaMemGetInfo's device
  if (info.supported) {
    H3_CUDA_RETURN_IF_ERROR(kernels::CurrentImageArch(&info.kernel_arch));
    info.overlap_and_clusters = kernels::CurrentImageTakesSm90();
  }
  size_t free_bytes = 0, total_bytes = 0;
  H3_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  info.free_memory_bytes = static_cast<int64_t>(free_bytes);
  return info;
}

}  // namespace

CudaInventory ListDevices() {
  DeviceRestorer restore;
  CudaInventory inventory;
  inventory.built_with_cuda = true;
  cudaRuntimeGetVersion(&inventory.runtime_version);
  if (cudaDriverGetVersion(&inventory.driver_version) != cudaSuccess) {
    inventory.driver_version = 0;
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    inventory.no_device_reason =
        inventory.driver_version == 0
            ? absl::StrCat(
                  "no NVIDIA driver is installed (the CUDA runtime "
                  "says: ",
                  cudaGetErrorString(err), ")")
            : absl::StrCat("the CUDA runtime found no usable GPU: ",
                           cudaGetErrorString(err), " (", cudaGetErrorName(err),
                           ")");
    return inventory;
  }
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<DeviceInfo> info = Describe(i);
    if (!info.ok()) {
      inventory.no_device_reason = absl::StrCat(
          "device ", i, " could not be queried: ", info.status().message());
      continue;
    }
    inventory.devices.push_back(*std::move(info));
  }
  if (count == 0)
    inventory.no_device_reason = "the CUDA runtime reports 0 GPUs";
  return inventory;
}

absl::StatusOr<double> SelfTest(int index) {
  DeviceRestorer restore;
  int count = 0;
  H3_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (index < 0 || index >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CUDA device ", index, " (", count, " present)"));
  }
  H3_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));

  // Odd sizes on purpose: the grid-stride tail and the bias wrap are exercised.
  constexpr int64_t kRows = 97, kCols = 1025, kN = kRows * kCols;
  std::vector<float> x(kN), bias(kCols), want(kN), got(kN);
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (float& v : x) v = dist(rng);
  for (float& v : bias) v = dist(rng);
  kernels::BiasGeluCpu({x.data(), bias.data(), want.data(), kRows, kCols});

  float* d_x = nullptr;
  float* d_bias = nullptr;
  H3_CUDA_RETURN_IF_ERROR(cudaMalloc(&d_x, kN * sizeof(float)));
  absl::Cleanup free_x = [d_x] { cudaFree(d_x); };
  H3_CUDA_RETURN_IF_ERROR(cudaMalloc(&d_bias, kCols * sizeof(float)));
  absl::Cleanup free_bias = [d_bias] { cudaFree(d_bias); };
  H3_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(d_x, x.data(), kN * sizeof(float), cudaMemcpyHostToDevice));
  H3_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_bias, bias.data(), kCols * sizeof(float),
                                     cudaMemcpyHostToDevice));
  H3_CUDA_RETURN_IF_ERROR(
      kernels::BiasGeluCuda({d_x, d_bias, d_x, kRows, kCols}, nullptr));
  H3_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  H3_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(got.data(), d_x, kN * sizeof(float), cudaMemcpyDeviceToHost));

  double worst = 0;
  for (int64_t i = 0; i < kN; ++i) {
    worst = std::max(worst, std::abs(double{got[i]} - want[i]) /
                                (1.0 + std::abs(double{want[i]})));
  }
  // Both sides are fp32 tanh of the same inputs: a few ulp apart at most.
  constexpr double kTolerance = 1e-5;
  if (!(worst <= kTolerance)) {
    return absl::DataLossError(absl::StrCat(
        "device ", index, " computed bias+GELU with relative error ", worst,
        " against the CPU (tolerance ", kTolerance, ")"));
  }
  return worst;
}

}  // namespace h3::engine::cuda
