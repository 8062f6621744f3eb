#include <atomic>

#include "kernels/cuda/device_major.h"
#include "kernels/cuda/kernel_image.h"

namespace h3::kernels {
namespace {

// Never launched: only asked for its attributes, which fails with
// cudaErrorNoKernelImageForDevice when no image fits the device.
__global__ void ProbeKernel() {}

}  // namespace

cudaError_t HasKernelImage(int device, bool* has) {
  *has = false;
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) return err;
  cudaFuncAttributes attributes;
  err = cudaFuncGetAttributes(&attributes, ProbeKernel);
  if (err == cudaErrorNoKernelImageForDevice ||
      err == cudaErrorInvalidDeviceFunction) {
    cudaGetLastError();
    return cudaSuccess;
  }
  if (err == cudaSuccess) *has = true;
  return err;
}

cudaError_t CurrentImageArch(int* arch) {
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
      *arch = seen;
      return cudaSuccess;
    }
  }
  // Every kernel of ours is built for the same architectures: the probe's
  // image is theirs.
  cudaFuncAttributes attributes;
  if (const cudaError_t err = cudaFuncGetAttributes(&attributes, ProbeKernel);
      err != cudaSuccess) {
    return err;
  }
  if (cached && attributes.ptxVersion > 0) {
    known[device].store(attributes.ptxVersion, std::memory_order_relaxed);
  }
  *arch = attributes.ptxVersion;
  return cudaSuccess;
}

bool CurrentImageTakesSm90() {
  int major = 0, arch = 0;
  if (CurrentDeviceMajor(&major) != cudaSuccess ||
      CurrentImageArch(&arch) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major >= 9 && arch >= 90;
}

}  // namespace h3::kernels
