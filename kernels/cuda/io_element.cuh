#ifndef H3_KERNELS_CUDA_IO_ELEMENT_CUH_
#define H3_KERNELS_CUDA_IO_ELEMENT_CUH_

// Device-side reads and writes of activation tensors whose elements are
// fp32, fp16 or bf16 (kernels/attention.h, kernels/h3.h: io_type): a read
// widens exactly to fp32, a write rounds once to nearest even
// (__float2half_rn, __float2bfloat16_rn), and for fp32 both are plain
// accesses (also the FlashConv kernels' element conversions). DispatchIo
// turns a run-time ElementType into the element type a kernel template
// takes.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/element_type.h"

namespace h3::kernels::io {

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Element i of `data`, whose type is known only at run time (kF32, kF16 or
// kBF16; anything else reads as fp32), widened exactly; and its store,
// rounded once to nearest even.
__device__ __forceinline__ float LoadAs(const void* data, ElementType type,
                                        int64_t i) {
  if (type == ElementType::kF16) {
    return __half2float(static_cast<const __half*>(data)[i]);
  }
  if (type == ElementType::kBF16) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
  }
  return static_cast<const float*>(data)[i];
}
__device__ __forceinline__ void StoreAs(void* data, ElementType type, int64_t i,
                                        float v) {
  if (type == ElementType::kF16) {
    static_cast<__half*>(data)[i] = __float2half_rn(v);
  } else if (type == ElementType::kBF16) {
    static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<float*>(data)[i] = v;
  }
}

// Calls f(T{}) with T the element type of `type` (kF32, kF16 or kBF16);
// cudaErrorInvalidValue for any other type.
template <typename F>
cudaError_t DispatchIo(ElementType type, F&& f) {
  switch (type) {
    case ElementType::kF32:
      return f(float{});
    case ElementType::kF16:
      return f(__half{});
    case ElementType::kBF16:
      return f(__nv_bfloat16{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace h3::kernels::io

#endif  // H3_KERNELS_CUDA_IO_ELEMENT_CUH_
