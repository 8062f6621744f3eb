// Scaffold: replaced by the implementation.
#include "kernels/cuda/h3_step.h"
namespace h3::kernels {
cudaError_t H3StepCuda(const H3StepParams&, cudaStream_t) { return cudaErrorNotSupported; }
int64_t H3StepBytes(const H3Shape&, int) { return 0; }
}  // namespace h3::kernels
