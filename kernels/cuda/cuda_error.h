#ifndef H3_KERNELS_CUDA_CUDA_ERROR_H_
#define H3_KERNELS_CUDA_CUDA_ERROR_H_

// Runtime errors as the host code of kernels/cuda/ reports them: "" for
// success, else a message naming the call (LinearCuda, the launch timing).

#include <cuda_runtime_api.h>

#include <string>

namespace h3::kernels {

inline std::string CudaError(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return "";
  return std::string(what) + " failed: " + cudaGetErrorName(err) + " (" +
         cudaGetErrorString(err) + ")";
}

}  // namespace h3::kernels

// Returns the message `expr` evaluates to, unless it is empty.
#define H3_RETURN_IF_NOT_EMPTY(expr)    \
  do {                                  \
    std::string error_ = (expr);        \
    if (!error_.empty()) return error_; \
  } while (false)

#endif  // H3_KERNELS_CUDA_CUDA_ERROR_H_
