// stream_gemm.cu for the CPU emulator (device.h first).
#include "kernels/cuda/stream_gemm.cu"
