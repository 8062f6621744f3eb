// The GPU decode step's host code and kernels (h3_step.cu) compiled for
// the CPU emulator (device.h first): H3StepCuda runs its kernels on the
// CPU.
#include "kernels/cuda/h3_step.cu"
