// The octet decode-step kernel (h3_step_octet.cu) for the CPU emulator.
#include "kernels/cuda/h3_step_octet.cu"
