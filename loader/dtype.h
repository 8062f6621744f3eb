#ifndef H3_LOADER_DTYPE_H_
#define H3_LOADER_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace h3::loader {

// Element types that occur in checkpoints and model files. Names follow the
// safetensors spelling (F32, F16, BF16, ...).
enum class DType {
  kF64,
  kF32,
  kF16,
  kBF16,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
};

// Bytes per element.
size_t DTypeSize(DType dtype);

// The safetensors name ("F32", "BF16", ...).
absl::string_view DTypeName(DType dtype);

// Inverse of DTypeName. InvalidArgument for a name we do not handle.
absl::StatusOr<DType> DTypeFromName(absl::string_view name);

// The converter's --dtype spelling: "fp32", "fp16" or "bf16". InvalidArgument
// otherwise.
absl::StatusOr<DType> DTypeFromFlag(absl::string_view flag);

// The inverse of DTypeFromFlag for kF32/kF16/kBF16 ("fp32", ...); the
// safetensors name for the other types.
absl::string_view DTypeFlag(DType dtype);

// True for kF64, kF32, kF16 and kBF16.
bool IsFloatingPoint(DType dtype);

// IEEE half and bfloat16 conversions. Narrowing rounds to nearest, ties to
// even; overflow gives infinity; NaN stays NaN (quiet).
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

// Converts `count` elements stored little-endian in `src` (type `from`) into
// `dst` (type `to`). Both must be floating-point types; `to` must be kF32,
// kF16 or kBF16. REQUIRES: src.size() == count * DTypeSize(from) and
// dst.size() == count * DTypeSize(to); otherwise InvalidArgument. F64 is
// first rounded to F32. Same-type conversion copies.
absl::Status ConvertFloats(DType from, absl::Span<const uint8_t> src, DType to,
                           absl::Span<uint8_t> dst);

}  // namespace h3::loader

#endif  // H3_LOADER_DTYPE_H_
