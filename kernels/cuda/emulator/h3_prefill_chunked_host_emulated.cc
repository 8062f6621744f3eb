// The chunked prefill's host code (h3_prefill_chunked.cu: tables, TakesRows,
// launches in groups of segments) for the CPU emulator (device.h first).
#include "kernels/cuda/h3_prefill_chunked.cu"
