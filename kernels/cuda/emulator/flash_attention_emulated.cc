// The tensor-core prefill attention's host code and kernels
// (flash_attention.cu and its fp16 and bf16 instances) compiled for the CPU
// emulator (device.h first): FlashAttentionPrefillCuda runs its kernels on
// the CPU.
#include "kernels/cuda/flash_attention.cu"
#include "kernels/cuda/flash_attention_bf16.cu"
#include "kernels/cuda/flash_attention_f16.cu"
