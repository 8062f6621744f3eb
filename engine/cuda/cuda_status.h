#ifndef H3_ENGINE_CUDA_CUDA_STATUS_H_
#define H3_ENGINE_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace h3::engine::cuda {

// OK for cudaSuccess; otherwise Internal with the CUDA error's name and text,
// the failing expression and where it was called. Clears the runtime's
// last-error slot so that the next call does not report the same error.
absl::Status CudaStatus(cudaError_t err, const char* expr, const char* file,
                        int line);

}  // namespace h3::engine::cuda

// Evaluates a CUDA runtime call; returns Internal from the enclosing function
// when it fails.
#define H3_CUDA_RETURN_IF_ERROR(expr)                                      \
  do {                                                                     \
    cudaError_t h3_cuda_err_ = (expr);                                     \
    if (h3_cuda_err_ != cudaSuccess) {                                     \
      return ::h3::engine::cuda::CudaStatus(h3_cuda_err_, #expr, __FILE__, \
                                            __LINE__);                     \
    }                                                                      \
  } while (false)

#endif  // H3_ENGINE_CUDA_CUDA_STATUS_H_
