// The packed-rows chunked prefill kernel (h3_prefill_rows_kernel.cu) for the
// CPU emulator (device.h first).
#include "kernels/cuda/h3_prefill_rows_kernel.cu"
