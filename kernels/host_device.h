#ifndef H3_KERNELS_HOST_DEVICE_H_
#define H3_KERNELS_HOST_DEVICE_H_

// H3_HOST_DEVICE marks functions that both the host compiler and nvcc's
// device pass compile (headers shared by a CPU twin and its CUDA kernel).
#if defined(__CUDACC__)
#define H3_HOST_DEVICE __host__ __device__
#else
#define H3_HOST_DEVICE
#endif

#endif  // H3_KERNELS_HOST_DEVICE_H_
