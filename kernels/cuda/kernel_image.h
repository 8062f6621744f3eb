#ifndef H3_KERNELS_CUDA_KERNEL_IMAGE_H_
#define H3_KERNELS_CUDA_KERNEL_IMAGE_H_

#include <cuda_runtime_api.h>

namespace h3::kernels {

// Sets *has to whether this binary carries machine code that device `device`
// can run (all our kernels are built for the same architectures, so one probe
// answers for all). Makes `device` current on the calling thread.
cudaError_t HasKernelImage(int device, bool* has);

// *arch: the virtual architecture (major * 10 + minor) the code of our
// kernels that runs on the current device was compiled for. 90 for the
// default build's sm_90a image on a 9.0 device; 80 where that device runs
// an sm_80 build through compute_80 PTX (CMAKE_CUDA_ARCHITECTURES without
// 90), whose kernels lack 9.0's instructions (griddepcontrol, clusters):
// the launches that need them ask for 90 here as well as of the device.
// Asked once per device; thread-safe.
cudaError_t CurrentImageArch(int* arch);

// Whether the current device and our kernels' image both take compute
// capability 9.0's launches (programmatic dependent launch, thread-block
// clusters); false, the runtime's error cleared, when it cannot tell.
bool CurrentImageTakesSm90();

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_KERNEL_IMAGE_H_
