// The GPU decode attention's host code and kernels (attention_decode.cu)
// compiled for the CPU emulator (device.h first): AttentionDecodeCuda runs
// its kernels on the CPU.
#include "kernels/cuda/attention_decode.cu"
