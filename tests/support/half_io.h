#ifndef H3_TESTS_SUPPORT_HALF_IO_H_
#define H3_TESTS_SUPPORT_HALF_IO_H_

// Inputs and expected outputs of the mixers' 16-bit I/O (kernels/attention.h,
// kernels/h3.h, kernels/flash_attention.h: io_type): a tensor of fp16 or
// bf16 elements and the fp32 values it holds exactly, and the bits an op
// must store for an fp32 result.

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/element_type.h"
#include "base/half_float.h"

namespace h3::testing {

// Element i of `values` rounded to `type` (kF16 or kBF16): its bits.
inline std::vector<uint16_t> HalfBits(const std::vector<float>& values,
                                      ElementType type) {
  std::vector<uint16_t> bits(values.size());
  StoreFloats(values.data(), static_cast<int64_t>(values.size()), bits.data(),
              type, 0);
  return bits;
}

// The values of 16-bit elements of `type`, widened exactly.
inline std::vector<float> HalfValues(const std::vector<uint16_t>& bits,
                                     ElementType type) {
  std::vector<float> values(bits.size());
  LoadFloats(bits.data(), type, 0, static_cast<int64_t>(bits.size()),
             values.data());
  return values;
}

// A 16-bit input tensor: `bits` to feed the op, `values` (exactly what the
// bits hold, as fp32) to feed the fp32 op it must agree with.
struct HalfInput {
  HalfInput(const std::vector<float>& x, ElementType type)
      : bits(HalfBits(x, type)), values(HalfValues(bits, type)) {}
  std::vector<uint16_t> bits;
  std::vector<float> values;
};

// A tensor of any of kF32, kF16 and kBF16 holding `values` rounded once to
// `type`: `bytes` to feed an op (or compare bit for bit), Values() what it
// holds, widened exactly.
struct TypedTensor {
  TypedTensor(const std::vector<float>& values, ElementType type)
      : type(type), bytes(values.size() * ElementSize(type)) {
    StoreFloats(values.data(), static_cast<int64_t>(values.size()),
                bytes.data(), type, 0);
  }
  std::vector<float> Values() const {
    std::vector<float> v(bytes.size() / ElementSize(type));
    LoadFloats(bytes.data(), type, 0, static_cast<int64_t>(v.size()), v.data());
    return v;
  }
  // The elements' bits, for a 16-bit type.
  std::vector<uint16_t> Bits() const {
    std::vector<uint16_t> bits(bytes.size() / 2);
    std::memcpy(bits.data(), bytes.data(), bits.size() * 2);
    return bits;
  }
  ElementType type;
  std::vector<unsigned char> bytes;
};

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_HALF_IO_H_
