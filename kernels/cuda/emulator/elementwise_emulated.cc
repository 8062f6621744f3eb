// elementwise.cu for the CPU emulator (device.h first).
#include "kernels/cuda/elementwise.cu"
