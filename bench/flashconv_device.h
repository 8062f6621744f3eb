#ifndef H3_BENCH_FLASHCONV_DEVICE_H_
#define H3_BENCH_FLASHCONV_DEVICE_H_

// The GPU helpers of h3_flashconv_bench: its policy on CUDA failures, and
// filling inputs with random normals and comparing two tensors on the device,
// so that 3 GB tensors never make a host round trip. Compiled by nvcc as
// C++17.

#include <cuda_runtime_api.h>
#include <errno.h>  // program_invocation_short_name (glibc)

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/h3_prefill.h"

namespace h3::bench {

// The benchmarks' policy on CUDA failures: print the call, where it was made
// and the runtime's error, and exit with status 1.
#define H3_BENCH_CUDA_CHECK(call) \
  ::h3::bench::CheckCuda((call), #call, __FILE__, __LINE__)

inline void CheckCuda(cudaError_t err, const char* call, const char* file,
                      int line) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s failed at %s:%d: %s: %s\n",
               program_invocation_short_name, call, file, line,
               cudaGetErrorName(err), cudaGetErrorString(err));
  std::exit(1);
}

// Fills n elements of `type` at `dst` with samples of N(0, 1): a Box-Muller
// transform of a hash of (seed, index), so the values depend only on the seed
// and the index. Enqueued on `stream`.
cudaError_t FillNormal(void* dst, int64_t n, ElementType type, uint64_t seed,
                       cudaStream_t stream);

// The largest |a[i] - b[i]| and the largest |b[i]| over n elements of `type`;
// a NaN in either tensor makes max_abs_diff NaN.
struct MaxDiff {
  float max_abs_diff = 0;
  float max_abs_ref = 0;
};

// Computes *out on `stream` and waits for it (it allocates and frees a few
// bytes of device memory: never inside a timed region).
cudaError_t ComputeMaxDiff(const void* a, const void* b, int64_t n,
                           ElementType type, cudaStream_t stream, MaxDiff* out);

}  // namespace h3::bench

#endif  // H3_BENCH_FLASHCONV_DEVICE_H_
