// tile_gemm.cu for the CPU emulator (device.h first).
#include "kernels/cuda/tile_gemm.cu"
