#ifndef H3_KERNELS_HOST_DEVICE_H_
#define H3_KERNELS_HOST_DEVICE_H_

// H3_HOST_DEVICE marks functions that both the host compiler and nvcc's
// device pass compile (headers shared by a CPU twin and its CUDA kernel).
#if defined(__CUDACC__)
#define H3_HOST_DEVICE __host__ __device__
#else
#define H3_HOST_DEVICE
#endif

// H3_UNROLL asks nvcc's device pass to unroll the loop that follows (arrays
// indexed by its counter then stay in registers); elsewhere it is nothing.
#if defined(__CUDA_ARCH__)
#define H3_UNROLL _Pragma("unroll")
#else
#define H3_UNROLL
#endif

#endif  // H3_KERNELS_HOST_DEVICE_H_
