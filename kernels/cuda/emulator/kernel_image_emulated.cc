// kernels/cuda/kernel_image.cu compiled for the CPU emulator (device.h
// first): its probe's attributes come from runtime.cc, which reports the
// emulated H100's compute capability 9.0 and an image built for it, so
// overlapped launches and clusters are taken by the same rule as on a GPU.
#include "kernels/cuda/kernel_image.cu"
