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

}  // namespace h3::kernels
