#ifndef H3_KERNELS_CUDA_CUBLASLT_API_H_
#define H3_KERNELS_CUDA_CUBLASLT_API_H_

// cuBLASLt, opened at run time (dlopen) on first use instead of linked.
// Why: libcublasLt's static thread-local storage is large, and glibc takes a
// linked library's TLS out of every thread's stack; civetweb (the metrics
// endpoint) starts its threads with small fixed stacks, and their creation
// fails in any process that links cuBLASLt. A dlopen-ed library's TLS is
// allocated on demand, so h3serve's threads are unaffected. (h3serve also
// gives every thread its static TLS back, server/thread_stack.h; the 94 KiB
// of cuBLASLt's would still cost every thread in every process that much.)

#include <cublasLt.h>

#include <string>

namespace h3::kernels {

struct CublasLtApi {
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtDestroy) cublasLtDestroy;
  decltype(&::cublasLtGetStatusName) cublasLtGetStatusName;
  decltype(&::cublasLtGetStatusString) cublasLtGetStatusString;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
  decltype(&::cublasLtMatmulAlgoCapGetAttribute)
      cublasLtMatmulAlgoCapGetAttribute;
  decltype(&::cublasLtMatmulAlgoCheck) cublasLtMatmulAlgoCheck;
  decltype(&::cublasLtMatmulAlgoConfigGetAttribute)
      cublasLtMatmulAlgoConfigGetAttribute;
  decltype(&::cublasLtMatmulAlgoConfigSetAttribute)
      cublasLtMatmulAlgoConfigSetAttribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute)
      cublasLtMatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy;
};

// The loaded API (loaded once, thread-safe), or null with *error saying
// which library or symbol is missing.
const CublasLtApi* LoadCublasLt(std::string* error);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_CUBLASLT_API_H_
