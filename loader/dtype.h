#ifndef H3_LOADER_DTYPE_H_
#define H3_LOADER_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/element_type.h"
#include "base/half.h"

namespace h3::loader {

// Element types as checkpoints and model files spell them
// (base/element_type.h is the enum).

// The safetensors name ("F32", "BF16", ...).
absl::string_view DTypeName(ElementType dtype);

// Inverse of DTypeName. InvalidArgument for a name we do not handle.
absl::StatusOr<ElementType> DTypeFromName(absl::string_view name);

// The converter's --dtype spelling: "fp32", "fp16" or "bf16". InvalidArgument
// otherwise.
absl::StatusOr<ElementType> DTypeFromFlag(absl::string_view flag);

// The inverse of DTypeFromFlag for kF32/kF16/kBF16 ("fp32", ...); the
// safetensors name for the other types.
absl::string_view DTypeFlag(ElementType dtype);

// True for kF64, kF32, kF16 and kBF16.
bool IsFloatingPoint(ElementType dtype);

// IEEE half and bfloat16 conversions (base/half.h). Narrowing rounds to
// nearest, ties to even; overflow gives infinity; NaN stays NaN (quiet).
using ::h3::BFloat16ToFloat;
using ::h3::FloatToBFloat16;
using ::h3::FloatToHalf;
using ::h3::HalfToFloat;

// Converts `count` elements stored little-endian in `src` (type `from`) into
// `dst` (type `to`). Both must be floating-point types; `to` must be kF32,
// kF16 or kBF16. REQUIRES: src.size() == count * ElementSize(from) and
// dst.size() == count * ElementSize(to); otherwise InvalidArgument. F64 is
// first rounded to F32. Same-type conversion copies.
absl::Status ConvertFloats(ElementType from, absl::Span<const uint8_t> src,
                           ElementType to, absl::Span<uint8_t> dst);

}  // namespace h3::loader

#endif  // H3_LOADER_DTYPE_H_
