#ifndef H3_BASE_ELEMENT_TYPE_H_
#define H3_BASE_ELEMENT_TYPE_H_

// The one element-type enum of h3serve: what the loader reads from
// checkpoints and model files, what the engine stores its weight matrices
// in, and what the kernels' tensors hold. Header-only and C++17, so that
// CUDA code (nvcc) and every module can include it.

#include <cstdint>

namespace h3 {

enum class ElementType {
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
constexpr int64_t ElementSize(ElementType type) {
  switch (type) {
    case ElementType::kF64:
    case ElementType::kI64:
      return 8;
    case ElementType::kF32:
    case ElementType::kI32:
      return 4;
    case ElementType::kF16:
    case ElementType::kBF16:
    case ElementType::kI16:
      return 2;
    case ElementType::kI8:
    case ElementType::kU8:
    case ElementType::kBool:
      return 1;
  }
  return 0;
}

// The short name flags and messages use: "fp32", "fp16", "bf16", "fp64",
// "i64", "i32", "i16", "i8", "u8", "bool". (Checkpoint files spell them
// their own way: loader/dtype.h.)
constexpr const char* ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kF64:
      return "fp64";
    case ElementType::kF32:
      return "fp32";
    case ElementType::kF16:
      return "fp16";
    case ElementType::kBF16:
      return "bf16";
    case ElementType::kI64:
      return "i64";
    case ElementType::kI32:
      return "i32";
    case ElementType::kI16:
      return "i16";
    case ElementType::kI8:
      return "i8";
    case ElementType::kU8:
      return "u8";
    case ElementType::kBool:
      return "bool";
  }
  return "?";
}

// Element i of a tensor of `type` at `base` (byte arithmetic for tensors
// whose type is chosen at run time).
inline const void* ElementAt(const void* base, int64_t i, ElementType type) {
  return static_cast<const char*>(base) + i * ElementSize(type);
}
inline void* ElementAt(void* base, int64_t i, ElementType type) {
  return static_cast<char*>(base) + i * ElementSize(type);
}

}  // namespace h3

#endif  // H3_BASE_ELEMENT_TYPE_H_
