// stream_split_gemm.cu for the CPU emulator (device.h first).
#include "kernels/cuda/stream_split_gemm.cu"
