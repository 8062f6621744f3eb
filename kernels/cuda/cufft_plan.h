#ifndef H3_KERNELS_CUDA_CUFFT_PLAN_H_
#define H3_KERNELS_CUDA_CUFFT_PLAN_H_

// cuFFT glue: results as cudaError_t, and an owned batched 1-D real plan.

#include <cuda_runtime_api.h>
#include <cufft.h>

#include <cstddef>
#include <utility>

namespace h3::kernels {

// Our kernels report cudaError_t; cuFFT's allocation failure keeps its
// meaning, every other cuFFT failure is an internal error.
inline cudaError_t CufftToCuda(cufftResult r) {
  if (r == CUFFT_SUCCESS) return cudaSuccess;
  if (r == CUFFT_ALLOC_FAILED) return cudaErrorMemoryAllocation;
  return cudaErrorUnknown;
}

// `count` real transforms of `nfft` points with rows of `real_dist` floats
// and `bins_dist` complex values (nfft/2 + 1 bins each): R2C reads the real
// rows and writes the complex ones, C2R the other way round. Owns the handle.
class CufftPlan {
 public:
  CufftPlan() = default;
  ~CufftPlan() {
    if (created_) cufftDestroy(handle_);
  }
  CufftPlan(CufftPlan&& o) noexcept
      : handle_(o.handle_),
        created_(std::exchange(o.created_, false)),
        work_(o.work_) {}
  CufftPlan& operator=(CufftPlan&& o) noexcept {
    std::swap(handle_, o.handle_);
    std::swap(created_, o.created_);
    std::swap(work_, o.work_);
    return *this;
  }
  CufftPlan(const CufftPlan&) = delete;
  CufftPlan& operator=(const CufftPlan&) = delete;

  // With auto_allocate false the caller provides the work area (at least
  // work_bytes()) with cufftSetWorkArea before each execution.
  // REQUIRES: type is CUFFT_R2C or CUFFT_C2R; called once per object.
  cudaError_t Make(cufftType type, long long nfft, long long count,
                   long long real_dist, long long bins_dist,
                   bool auto_allocate) {
    cufftResult r = cufftCreate(&handle_);
    if (r != CUFFT_SUCCESS) return CufftToCuda(r);
    created_ = true;
    if (!auto_allocate) r = cufftSetAutoAllocation(handle_, 0);
    if (r != CUFFT_SUCCESS) return CufftToCuda(r);
    const bool r2c = type == CUFFT_R2C;
    long long n[1] = {nfft};
    long long real_embed[1] = {real_dist};
    long long bins_embed[1] = {bins_dist};
    r = cufftMakePlanMany64(handle_, 1, n, r2c ? real_embed : bins_embed, 1,
                            r2c ? real_dist : bins_dist,
                            r2c ? bins_embed : real_embed, 1,
                            r2c ? bins_dist : real_dist, type, count, &work_);
    return CufftToCuda(r);
  }

  cufftHandle get() const { return handle_; }
  size_t work_bytes() const { return work_; }

 private:
  cufftHandle handle_ = 0;
  bool created_ = false;
  size_t work_ = 0;
};

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_CUFFT_PLAN_H_
