#include "tests/support/gpu_test.h"

#include <cuda_runtime_api.h>

namespace h3::testing {

bool HasCudaDevice(std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    *why = cudaGetErrorString(err);
    cudaGetLastError();  // reset the last-error slot for later runtime calls
    return false;
  }
  if (count == 0) {
    *why = "the CUDA runtime reports 0 devices";
    return false;
  }
  return true;
}

}  // namespace h3::testing
