// stream_gemm_norm.cu for the CPU emulator (device.h first).
#include "kernels/cuda/stream_gemm_norm.cu"
