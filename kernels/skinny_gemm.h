#ifndef H3_KERNELS_SKINNY_GEMM_H_
#define H3_KERNELS_SKINNY_GEMM_H_

// The batch-invariant decode product (docs/cuda-engine.md, "Batch
// invariance"): for 1 to 64 rows,
//
//   y[rows, n] = epilogue(x[rows, k] W^T + bias),  W [n, k] row-major,
//
// x, W and y each fp32, fp16 or bf16 (x and W widened to fp32 exactly, y the
// fp32 result rounded once to nearest even), bias fp32 or y's 16-bit type
// (widened exactly, added in fp32 before that one rounding). Every
// output element is reduced in ONE order that depends on k alone, never on
// rows, on the row's index or on n, so a row's result is bitwise the same
// alone or in any batch and position:
//
//   1. k is cut into chunks of kSkinnyChunk = 256 elements; slice `lane`
//      (0..31) of chunk c is elements c 256 + 8 lane + e, e = 0..7 (one
//      16-byte load of 16-bit W). Elements past k count as x = W = 0.
//   2. Slice lane's partial: acc = fma(x, w, acc) from acc = 0, over chunks in
//      increasing c, and within a chunk over e in increasing order.
//   3. The 32 partials are folded: for width 16, 8, 4, 2, 1,
//      p[l] = p[l] + p[l + width] for l < width (a warp's xor butterfly).
//   4. y = p[0] + float(bias[j]) (when bias), then SkinnyGeluTanh (when
//      gelu), then rounded to y_type.
//
// SkinnyGemmEmulation (kernels/cpu/skinny_gemm.cc) is that algorithm in plain
// C++; SkinnyGemmCuda (kernels/cuda/skinny_gemm.h) must match it bitwise.

#include <cmath>
#include <cstdint>

#include "base/element_type.h"
#include "kernels/host_device.h"

namespace h3::kernels {

constexpr int kSkinnyLanes = 32;     // slices per chunk: a warp
constexpr int kSkinnyLaneElems = 8;  // a 16-byte load of fp16/bf16
constexpr int kSkinnyChunk = kSkinnyLanes * kSkinnyLaneElems;
constexpr int64_t kSkinnyMaxRows = 64;
// The kernel keeps a block's kSkinnyCols rows of W (the whole k) in shared
// memory, at most kSkinnyMaxSharedBytes: k <= 12288 for fp16/bf16 (d_inner of
// every preset up to 2.7B is 10240), k <= 6144 for fp32.
constexpr int kSkinnyCols = 4;
constexpr int64_t kSkinnyMaxSharedBytes = 96 * 1024;

// REQUIRES (else SkinnyGemmCheck names what is wrong): 0 <= rows <=
// kSkinnyMaxRows, n >= 0, 1 <= k <= SkinnyGemmMaxK(w_type); x [rows, k] of
// x_type, w [n, k] of w_type, y [rows, n] of y_type, row-major and
// contiguous, bias [n] of bias_type or null; x_type, w_type and y_type each
// kF32, kF16 or kBF16; bias_type kF32, or y_type when y_type is 16-bit;
// y overlaps neither x, w nor bias. Any alignment (aligned rows load faster).
struct SkinnyGemmParams {
  const void* x = nullptr;  // [rows, k] of x_type
  ElementType x_type = ElementType::kF32;
  const void* w = nullptr;  // [n, k] of w_type
  ElementType w_type = ElementType::kF16;
  const void* bias = nullptr;  // [n] of bias_type, or null
  ElementType bias_type = ElementType::kF32;
  void* y = nullptr;  // [rows, n] of y_type
  ElementType y_type = ElementType::kF32;
  int64_t rows = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool gelu = false;  // y = SkinnyGeluTanh(x W^T + bias)
};

// The largest k the kernel takes for `type` (0 for types it does not take).
inline int64_t SkinnyGemmMaxK(ElementType type) {
  if (type != ElementType::kF32 && type != ElementType::kF16 &&
      type != ElementType::kBF16) {
    return 0;
  }
  return kSkinnyMaxSharedBytes / (kSkinnyCols * ElementSize(type));
}

// "" when `p` meets the REQUIRES above (of the pointers, only that x, w and
// y are not null when there is work), else the broken rule with the field and
// its limit.
inline const char* SkinnyGemmCheck(const SkinnyGemmParams& p) {
  if (SkinnyGemmMaxK(p.w_type) == 0) return "w_type: fp32, fp16 or bf16 only";
  if (SkinnyGemmMaxK(p.x_type) == 0) return "x_type: fp32, fp16 or bf16 only";
  if (SkinnyGemmMaxK(p.y_type) == 0) return "y_type: fp32, fp16 or bf16 only";
  if (p.bias_type != ElementType::kF32 && p.bias_type != p.y_type) {
    return "bias_type: fp32, or y_type when y_type is 16-bit";
  }
  if (p.rows < 0 || p.rows > kSkinnyMaxRows) return "rows: 0 to 64";
  if (p.n < 0) return "n: must not be negative";
  if (p.k < 1 || p.k > SkinnyGemmMaxK(p.w_type)) {
    return p.w_type == ElementType::kF32 ? "k: 1 to 6144 for fp32 weights"
                                         : "k: 1 to 12288 for 16-bit weights";
  }
  if (p.rows > 0 && p.n > 0 &&
      (p.x == nullptr || p.w == nullptr || p.y == nullptr)) {
    return "x, w and y: must not be null";
  }
  return "";
}

// The arithmetic below uses only operations IEEE 754 rounds exactly (+, *, /,
// fma, rint, ldexp), each written out (the device side uses the _rn
// intrinsics, which nvcc never contracts), so host and device give the same
// bits. The host file is compiled with -ffp-contract=off.
H3_HOST_DEVICE inline float SkinnyAdd(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
H3_HOST_DEVICE inline float SkinnyMul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
H3_HOST_DEVICE inline float SkinnyDiv(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
H3_HOST_DEVICE inline float SkinnyFma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// e^a to about 2 ulp: a = n ln2 + r, |r| <= ln2 / 2 (ln2 in two parts, so r
// is exact to 2^-32), e^r by its Taylor polynomial of degree 7 (truncation
// r^8 / 8! < 6e-9 relative), scaled by 2^n.
H3_HOST_DEVICE inline float SkinnyExp(float a) {
  if (!(a < 88.8f)) return a != a ? a : INFINITY;  // NaN stays NaN
  if (a < -104.0f) return 0.0f;
  const float n = rintf(SkinnyMul(a, 1.44269502f));  // a / ln2
  float r = SkinnyFma(-n, 0.693145752f, a);          // ln2's top 16 bits
  r = SkinnyFma(-n, 1.42860677e-6f, r);              // and the rest
  float p = 1.98412698e-4f;                          // 1 / 7!
  p = SkinnyFma(p, r, 1.38888889e-3f);               // 1 / 6!
  p = SkinnyFma(p, r, 8.33333333e-3f);               // 1 / 5!
  p = SkinnyFma(p, r, 4.16666667e-2f);               // 1 / 4!
  p = SkinnyFma(p, r, 0.166666667f);                 // 1 / 3!
  p = SkinnyFma(p, r, 0.5f);
  p = SkinnyFma(p, r, 1.0f);
  p = SkinnyFma(p, r, 1.0f);
  return ldexpf(p, static_cast<int>(n));
}

// GELU, tanh form: 0.5 v (1 + tanh(u)), u = sqrt(2/pi) (v + 0.044715 v^3),
// written as v / (1 + e^(-2u)) (the same function, without tanh's
// cancellation near 0 and without a library tanh that differs between host
// and device).
H3_HOST_DEVICE inline float SkinnyGeluTanh(float v) {
  constexpr float kTwoSqrt2OverPi = 1.59576912f;  // 2 sqrt(2 / pi)
  constexpr float kCoeff = 0.044715f;
  const float v3 = SkinnyMul(SkinnyMul(v, v), v);
  const float inner = SkinnyFma(kCoeff, v3, v);  // v + 0.044715 v^3
  const float e = SkinnyExp(SkinnyMul(-kTwoSqrt2OverPi, inner));
  return SkinnyDiv(v, SkinnyAdd(1.0f, e));
}

// The specification, on the host: the algorithm above, single-threaded.
// REQUIRES: SkinnyGemmCheck(p) is "".
void SkinnyGemmEmulation(const SkinnyGemmParams& p);

}  // namespace h3::kernels

#endif  // H3_KERNELS_SKINNY_GEMM_H_
