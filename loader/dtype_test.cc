#include "loader/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace h3::loader {
namespace {

TEST(DTypeTest, NamesRoundTrip) {
  for (ElementType d : {ElementType::kF64, ElementType::kF32, ElementType::kF16,
                        ElementType::kBF16, ElementType::kI64,
                        ElementType::kI32, ElementType::kI16, ElementType::kI8,
                        ElementType::kU8, ElementType::kBool}) {
    absl::StatusOr<ElementType> back = DTypeFromName(DTypeName(d));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, d);
  }
  EXPECT_FALSE(DTypeFromName("C64").ok());
  EXPECT_EQ(*DTypeFromFlag("bf16"), ElementType::kBF16);
  EXPECT_FALSE(DTypeFromFlag("int8").ok());
  EXPECT_EQ(ElementSize(ElementType::kBF16), 2u);
}

TEST(DTypeTest, HalfKnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // below the rounding midpoint
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // tie -> even (2)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  // 1 + 2^-11 is exactly between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::nanf("")) & 0x7e00, 0x7e00);
}

TEST(DTypeTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(DTypeTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  uint32_t bits = 0x3f808000;  // exactly halfway between 0x3f80 and 0x3f81
  float f;
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(FloatToBFloat16(f), 0x3f80);
  bits = 0x3f818000;  // halfway between 0x3f81 and 0x3f82: to even
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(FloatToBFloat16(f), 0x3f82);
  bits = 0x3f808001;
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(FloatToBFloat16(f), 0x3f81);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
}

TEST(DTypeTest, ConvertFloatsChecksSizes) {
  std::vector<float> src = {1.0f, -0.5f, 3.0f};
  std::vector<uint8_t> dst(6);
  auto bytes = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(src.data()),
                                   src.size() * 4);
  ASSERT_TRUE(ConvertFloats(ElementType::kF32, bytes, ElementType::kF16,
                            absl::MakeSpan(dst))
                  .ok());
  uint16_t h[3];
  std::memcpy(h, dst.data(), 6);
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[1], 0xb800);
  std::vector<uint8_t> wrong(5);
  EXPECT_FALSE(ConvertFloats(ElementType::kF32, bytes, ElementType::kF16,
                             absl::MakeSpan(wrong))
                   .ok());
  EXPECT_FALSE(ConvertFloats(ElementType::kI32, bytes, ElementType::kF32,
                             absl::MakeSpan(dst))
                   .ok());
}

TEST(DTypeTest, BulkConversionMatchesScalar) {
  // Covers the vectorised F32->F16 path (blocks of 8 and a tail) against the
  // scalar reference on awkward values.
  std::vector<float> src;
  for (uint32_t bits = 0; bits < 0xffffffffu - 0x00f00001u;
       bits += 0x00f00001u) {
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isnan(f)) src.push_back(f);
  }
  src.push_back(65519.0f);
  src.push_back(std::ldexp(3.0f, -25));
  for (ElementType to : {ElementType::kF16, ElementType::kBF16}) {
    std::vector<uint8_t> dst(src.size() * 2);
    ASSERT_TRUE(ConvertFloats(ElementType::kF32,
                              absl::MakeConstSpan(
                                  reinterpret_cast<const uint8_t*>(src.data()),
                                  src.size() * 4),
                              to, absl::MakeSpan(dst))
                    .ok());
    for (size_t i = 0; i < src.size(); ++i) {
      uint16_t got;
      std::memcpy(&got, dst.data() + 2 * i, 2);
      const uint16_t want = to == ElementType::kF16 ? FloatToHalf(src[i])
                                                    : FloatToBFloat16(src[i]);
      ASSERT_EQ(got, want) << src[i];
    }
  }
}

}  // namespace
}  // namespace h3::loader
