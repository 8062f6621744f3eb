#ifndef H3_KERNELS_CUDA_ELEMENT_TYPE_H_
#define H3_KERNELS_CUDA_ELEMENT_TYPE_H_

#include <cstdint>

namespace h3::kernels {

// The element types of the GPU kernels' tensors: activations and weights.
// SSM states and parameters are always fp32.
enum class ElementType { kFloat32, kFloat16, kBFloat16 };

inline const char* ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kFloat16:
      return "fp16";
    case ElementType::kBFloat16:
      return "bf16";
    case ElementType::kFloat32:
      break;
  }
  return "fp32";
}

inline int64_t ElementSize(ElementType type) {
  return type == ElementType::kFloat32 ? 4 : 2;
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_ELEMENT_TYPE_H_
