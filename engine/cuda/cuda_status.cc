#include "engine/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace h3::engine::cuda {

absl::Status CudaStatus(cudaError_t err, const char* expr, const char* file,
                        int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat(cudaGetErrorName(err), ": ",
                                          cudaGetErrorString(err), " in ", expr,
                                          " at ", file, ":", line));
}

}  // namespace h3::engine::cuda
