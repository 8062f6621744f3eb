#ifndef H3_KERNELS_CUDA_KERNEL_IMAGE_H_
#define H3_KERNELS_CUDA_KERNEL_IMAGE_H_

#include <cuda_runtime_api.h>

namespace h3::kernels {

// Sets *has to whether this binary carries machine code that device `device`
// can run (all our kernels are built for the same architectures, so one probe
// answers for all). Makes `device` current on the calling thread.
cudaError_t HasKernelImage(int device, bool* has);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_KERNEL_IMAGE_H_
