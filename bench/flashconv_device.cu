// FillNormal and ComputeMaxDiff for h3_flashconv_bench: grid-stride loops
// over the element types of H3PrefillCudaParams.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>

#include "bench/flashconv_device.h"

namespace h3::bench {
namespace {

// 256 threads a block, at most 4096 blocks: a few waves on any current GPU
// (an H100 holds 132 x 2048 threads); the grid-stride loops cover the rest.
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

int Blocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>(
      kMaxBlocks, std::max<int64_t>(1, (n + kThreads - 1) / kThreads)));
}

// The splitmix64 finaliser: a bijective hash with good avalanche.
__device__ uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T>
__device__ T FromFloat(float x);
template <>
__device__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ float ToFloat(float x) { return x; }
__device__ float ToFloat(__half x) { return __half2float(x); }
__device__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__global__ void FillNormalKernel(T* dst, int64_t n, uint64_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += stride) {
    const uint64_t r = Mix(seed ^ Mix(static_cast<uint64_t>(i)));
    // Two uniforms from the two 32-bit halves; u1 in (0, 1] keeps log finite.
    const float u1 = (static_cast<float>(r >> 32) + 1.0f) * 0x1p-32f;
    const float u2 = static_cast<float>(static_cast<uint32_t>(r)) * 0x1p-32f;
    dst[i] = FromFloat<T>(sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}

// max(a, b) that keeps a NaN from either side (fmaxf would drop it).
__device__ float MaxKeepNan(float a, float b) {
  return (a != a || a > b) ? a : b;
}

// out[0] = max |a - b|, out[1] = max |b|, as the bits of non-negative floats
// (whose order as unsigned integers is their order as floats; NaN, with its
// sign bit cleared by fabsf, sorts above infinity).
template <typename T>
__global__ void MaxDiffKernel(const T* a, const T* b, int64_t n,
                              unsigned* out) {
  float diff = 0, ref = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += stride) {
    const float x = ToFloat(a[i]), y = ToFloat(b[i]);
    diff = MaxKeepNan(fabsf(x - y), diff);
    ref = MaxKeepNan(fabsf(y), ref);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    diff = MaxKeepNan(diff, __shfl_xor_sync(0xffffffffu, diff, offset));
    ref = MaxKeepNan(ref, __shfl_xor_sync(0xffffffffu, ref, offset));
  }
  if (threadIdx.x % 32 == 0) {
    atomicMax(&out[0], __float_as_uint(diff));
    atomicMax(&out[1], __float_as_uint(ref));
  }
}

template <typename T>
void LaunchFill(void* dst, int64_t n, uint64_t seed, cudaStream_t stream) {
  FillNormalKernel<T>
      <<<Blocks(n), kThreads, 0, stream>>>(static_cast<T*>(dst), n, seed);
}

template <typename T>
void LaunchMaxDiff(const void* a, const void* b, int64_t n, unsigned* out,
                   cudaStream_t stream) {
  MaxDiffKernel<T><<<Blocks(n), kThreads, 0, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), n, out);
}

}  // namespace

cudaError_t FillNormal(void* dst, int64_t n, ElementType type, uint64_t seed,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (type) {
    case ElementType::kF32:
      LaunchFill<float>(dst, n, seed, stream);
      break;
    case ElementType::kF16:
      LaunchFill<__half>(dst, n, seed, stream);
      break;
    case ElementType::kBF16:
      LaunchFill<__nv_bfloat16>(dst, n, seed, stream);
      break;
  }
  return cudaGetLastError();
}

cudaError_t ComputeMaxDiff(const void* a, const void* b, int64_t n,
                           ElementType type, cudaStream_t stream,
                           MaxDiff* out) {
  unsigned* bits = nullptr;
  cudaError_t err = cudaMalloc(&bits, 2 * sizeof(unsigned));
  if (err != cudaSuccess) return err;
  err = cudaMemsetAsync(bits, 0, 2 * sizeof(unsigned), stream);
  if (err == cudaSuccess && n > 0) {
    switch (type) {
      case ElementType::kF32:
        LaunchMaxDiff<float>(a, b, n, bits, stream);
        break;
      case ElementType::kF16:
        LaunchMaxDiff<__half>(a, b, n, bits, stream);
        break;
      case ElementType::kBF16:
        LaunchMaxDiff<__nv_bfloat16>(a, b, n, bits, stream);
        break;
    }
    err = cudaGetLastError();
  }
  unsigned host[2] = {0, 0};
  if (err == cudaSuccess) {
    err = cudaMemcpyAsync(host, bits, sizeof host, cudaMemcpyDeviceToHost,
                          stream);
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  cudaFree(bits);
  if (err != cudaSuccess) return err;
  static_assert(sizeof(float) == sizeof(unsigned));
  std::memcpy(&out->max_abs_diff, &host[0], sizeof(float));
  std::memcpy(&out->max_abs_ref, &host[1], sizeof(float));
  return cudaSuccess;
}

}  // namespace h3::bench
