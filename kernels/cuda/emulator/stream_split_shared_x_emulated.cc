// stream_split_shared_x.cu for the CPU emulator (device.h first).
#include "kernels/cuda/stream_split_shared_x.cu"
