#include "loader/dtype.h"

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"

namespace h3::loader {
namespace {

struct DTypeInfo {
  ElementType dtype;
  absl::string_view name;
};

constexpr DTypeInfo kDTypes[] = {
    {ElementType::kF64, "F64"}, {ElementType::kF32, "F32"},
    {ElementType::kF16, "F16"}, {ElementType::kBF16, "BF16"},
    {ElementType::kI64, "I64"}, {ElementType::kI32, "I32"},
    {ElementType::kI16, "I16"}, {ElementType::kI8, "I8"},
    {ElementType::kU8, "U8"},   {ElementType::kBool, "BOOL"},
};

const DTypeInfo& Info(ElementType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  return kDTypes[0];  // unreachable: every enumerator is listed
}

// Reads element `i` of a little-endian float array of type `from` as float.
float LoadAsFloat(ElementType from, const uint8_t* p, size_t i) {
  switch (from) {
    case ElementType::kF64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return static_cast<float>(d);
    }
    case ElementType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return HalfToFloat(h);
    }
    case ElementType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return BFloat16ToFloat(h);
    }
    default: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
  }
}

void F32ToF16Scalar(const uint8_t* s, uint8_t* d, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    float f;
    std::memcpy(&f, s + 4 * i, 4);
    const uint16_t h = FloatToHalf(f);
    std::memcpy(d + 2 * i, &h, 2);
  }
}

#if defined(__x86_64__)
// VCVTPS2PH with round-to-nearest-even: the same results as FloatToHalf for
// every non-NaN input (NaNs stay NaN, with their payload).
__attribute__((target("avx,f16c"))) void F32ToF16Hardware(const uint8_t* s,
                                                          uint8_t* d,
                                                          size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(s + 4 * i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  F32ToF16Scalar(s, d, i, count);
}

// CPUID: F16C and AVX, and the OS saving the YMM registers.
bool HasF16C() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  if (!(c & bit_F16C) || !(c & bit_AVX) || !(c & bit_OSXSAVE)) return false;
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6) == 6;
}
#endif

void F32ToF16(const uint8_t* s, uint8_t* d, size_t count) {
#if defined(__x86_64__)
  static const bool f16c = HasF16C();
  if (f16c) return F32ToF16Hardware(s, d, count);
#endif
  F32ToF16Scalar(s, d, 0, count);
}

}  // namespace

absl::string_view DTypeName(ElementType dtype) { return Info(dtype).name; }

absl::StatusOr<ElementType> DTypeFromName(absl::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported tensor dtype '", name, "'"));
}

absl::StatusOr<ElementType> DTypeFromFlag(absl::string_view flag) {
  if (flag == "fp32") return ElementType::kF32;
  if (flag == "fp16") return ElementType::kF16;
  if (flag == "bf16") return ElementType::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype must be fp32, fp16 or bf16, not '", flag, "'"));
}

absl::string_view DTypeFlag(ElementType dtype) {
  const bool flag = dtype == ElementType::kF32 || dtype == ElementType::kF16 ||
                    dtype == ElementType::kBF16;
  return flag ? ElementTypeName(dtype) : DTypeName(dtype);
}

bool IsFloatingPoint(ElementType dtype) {
  return dtype == ElementType::kF64 || dtype == ElementType::kF32 ||
         dtype == ElementType::kF16 || dtype == ElementType::kBF16;
}

absl::Status ConvertFloats(ElementType from, absl::Span<const uint8_t> src,
                           ElementType to, absl::Span<uint8_t> dst) {
  if (!IsFloatingPoint(from) ||
      !(to == ElementType::kF32 || to == ElementType::kF16 ||
        to == ElementType::kBF16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot convert ", DTypeName(from), " to ", DTypeName(to)));
  }
  const size_t count = src.size() / ElementSize(from);
  if (src.size() % ElementSize(from) != 0 ||
      dst.size() != count * ElementSize(to)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ConvertFloats: ", src.size(), " bytes of ", DTypeName(from),
        " do not fill ", dst.size(), " bytes of ", DTypeName(to)));
  }
  if (from == to) {
    if (count > 0) std::memcpy(dst.data(), src.data(), src.size());
    return absl::OkStatus();
  }
  const uint8_t* s = src.data();
  uint8_t* d = dst.data();
  // The conversions a checkpoint conversion spends its time in get tight
  // loops (F16C instructions where the CPU has them); the rest goes through
  // float one element at a time.
  if (from == ElementType::kF32 && to == ElementType::kF16) {
    F32ToF16(s, d, count);
  } else if (from == ElementType::kF32 && to == ElementType::kBF16) {
    for (size_t i = 0; i < count; ++i) {
      float f;
      std::memcpy(&f, s + 4 * i, 4);
      const uint16_t h = FloatToBFloat16(f);
      std::memcpy(d + 2 * i, &h, 2);
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      const float f = LoadAsFloat(from, s, i);
      if (to == ElementType::kF32) {
        std::memcpy(d + 4 * i, &f, 4);
      } else {
        const uint16_t h =
            to == ElementType::kF16 ? FloatToHalf(f) : FloatToBFloat16(f);
        std::memcpy(d + 2 * i, &h, 2);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace h3::loader
