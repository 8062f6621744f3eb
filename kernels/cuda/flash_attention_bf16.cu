// The tensor-core attention kernel's bf16 instances (head_dim 64 and 128).
#include "kernels/cuda/flash_attention_kernel.cuh"

namespace h3::kernels::flash {

cudaError_t LaunchBf16(const LaunchArgs& args, cudaStream_t stream) {
  return LaunchForIo<__nv_bfloat16>(args, stream);
}

}  // namespace h3::kernels::flash
