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
  // Every kernel of ours is built for the same architectures: the probe's
  // image is theirs.
  return CachedPerDevice(
      [](int, int* answer) {
        cudaFuncAttributes attributes;
        const cudaError_t err = cudaFuncGetAttributes(&attributes, ProbeKernel);
        if (err == cudaSuccess) *answer = attributes.ptxVersion;
        return err;
      },
      arch);
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
