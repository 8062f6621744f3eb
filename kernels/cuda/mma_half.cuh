#ifndef H3_KERNELS_CUDA_MMA_HALF_CUH_
#define H3_KERNELS_CUDA_MMA_HALF_CUH_

// The 16-bit operand types' operations that tensor-core kernels share
// (FlashAttention, the decode product): rounding, packing two values into a
// 32-bit fragment register (the first in the low 16 bits, as memory order
// puts it), and one mma.sync.m16n8k16 with fp32 accumulators. sm_80 and
// later; the host entries refuse older devices (CheckMmaDevice).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_major.h"

namespace h3::kernels {

// cudaSuccess when the current device runs HalfOps' MMAs (compute
// capability 8.0 or later: mma.sync with bf16), cudaErrorNotSupported when
// it does not, else the runtime's error.
inline cudaError_t CheckMmaDevice() {
  int major = 0;
  if (const cudaError_t err = CurrentDeviceMajor(&major); err != cudaSuccess) {
    return err;
  }
  return major >= 8 ? cudaSuccess : cudaErrorNotSupported;
}

// Four 8 x 8 matrices of 16-bit elements from shared memory
// (ldmatrix.x4, sm_80 and later): lane l gives the address of row l % 8 of
// matrix l / 8 (16 bytes, 16-byte aligned), and receives in r[i] the
// elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix i, the first
// in the low half: an MMA fragment register's layout.
__device__ __forceinline__ void LdMatrixX4(const void* row, uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#elif defined(H3_CUDA_EMULATOR)
  ::h3::emulator::LdMatrixX4(row, r);
#else
  __trap();    // the host entry refuses devices before sm_80
#endif
}

template <typename T>
struct HalfOps;

template <>
struct HalfOps<__half> {
  static __device__ __half Round(float x) { return __float2half_rn(x); }
  static __device__ float Value(__half x) { return __half2float(x); }
  static __device__ uint32_t Pack(__half lo, __half hi) {
    __half2 h = __halves2half2(lo, hi);  // lo in the low 16 bits
    return *reinterpret_cast<uint32_t*>(&h);
  }
  // Pack(Round(lo), Round(hi)) in one conversion.
  static __device__ uint32_t PackFloats(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  // c += a b on one m16n8k16 tile, fp32 accumulators.
  static __device__ void Mma(float* c, const uint32_t* a, uint32_t b0,
                             uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(H3_CUDA_EMULATOR)
    ::h3::emulator::MmaM16N8K16<false>(c, a, b0, b1);
#else
    __trap();  // the host entry refuses devices before sm_80
#endif
  }
};

template <>
struct HalfOps<__nv_bfloat16> {
  static __device__ __nv_bfloat16 Round(float x) {
    return __float2bfloat16_rn(x);
  }
  static __device__ float Value(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ uint32_t Pack(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    __nv_bfloat162 h;
    h.x = lo;
    h.y = hi;
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ uint32_t PackFloats(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ void Mma(float* c, const uint32_t* a, uint32_t b0,
                             uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(H3_CUDA_EMULATOR)
    ::h3::emulator::MmaM16N8K16<true>(c, a, b0, b1);
#else
    __trap();
#endif
  }
};

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_MMA_HALF_CUH_
