// FlashAttentionEmulation with a 16-bit KV cache of the operand type
// (kernels/flash_attention.h): the kernel copies such a cache's tiles
// instead of rounding fp32 ones, so the outputs must be, bit for bit, those
// of the fp32-cache run on the same inputs, and the cache must hold that
// run's rotated keys and values rounded once to the type.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "base/element_type.h"
#include "gtest/gtest.h"
#include "kernels/flash_attention.h"
#include "tests/support/flash_attention_cases.h"
#include "tests/support/half_io.h"

namespace h3::kernels::flash {
namespace {

using Typed = h3::testing::TypedTensor;

// (operand type = cache type, io_type is fp32), or io_type = cache type too.
class FlashAttentionKvTest
    : public ::testing::TestWithParam<std::tuple<ElementType, bool>> {};

TEST_P(FlashAttentionKvTest, HalfCacheEqualsFp32Cache) {
  const auto [type, half_io] = GetParam();
  const ElementType io_type = half_io ? type : ElementType::kF32;
  // Several sequences, one and several key tiles, ragged ends, prefixes.
  for (const Case& c : {Case{2, 64, 64, type, {{0, 17}, {64, 65}, {3, 1}}},
                        Case{1, 128, 32, type, {{70, 9}}}}) {
    SCOPED_TRACE(CaseName(c));
    const Inputs in = MakeInputs(c, 5);
    const int64_t d = in.shape.d_model();
    const Typed qkv(in.qkv, io_type);
    std::vector<std::vector<float>> k32 = in.k, v32 = in.v;
    std::vector<Typed> k16, v16;
    for (size_t s = 0; s < c.chunks.size(); ++s) {
      k16.emplace_back(in.k[s], type);
      v16.emplace_back(in.v[s], type);
    }
    std::vector<Sequence> seqs32, seqs16;
    int64_t row = 0;
    for (size_t s = 0; s < c.chunks.size(); ++s) {
      const Chunk& ch = c.chunks[s];
      const int64_t cap = in.Capacity(ch);
      seqs32.push_back(
          {ch.prefix, ch.length, row, {k32[s].data(), v32[s].data(), cap}});
      seqs16.push_back({ch.prefix,
                        ch.length,
                        row,
                        {k16[s].bytes.data(), v16[s].bytes.data(), cap, type}});
      row += ch.length;
    }
    const int count = static_cast<int>(c.chunks.size());
    Typed out32(std::vector<float>(in.rows * d), io_type);
    Typed out16 = out32;
    Params p{in.shape,
             type,
             count,
             seqs32.data(),
             qkv.bytes.data(),
             in.freq(),
             out32.bytes.data(),
             io_type};
    FlashAttentionEmulation(p);
    p.seqs = seqs16.data();
    p.out = out16.bytes.data();
    FlashAttentionEmulation(p);

    EXPECT_EQ(out16.bytes, out32.bytes);
    for (size_t s = 0; s < c.chunks.size(); ++s) {
      EXPECT_EQ(k16[s].bytes, Typed(k32[s], type).bytes) << s;
      EXPECT_EQ(v16[s].bytes, Typed(v32[s], type).bytes) << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, FlashAttentionKvTest,
    ::testing::Combine(::testing::Values(ElementType::kF16, ElementType::kBF16),
                       ::testing::Bool()),
    [](const auto& info) {
      return std::string(ElementTypeName(std::get<0>(info.param))) +
             (std::get<1>(info.param) ? "_half_io" : "_fp32_io");
    });

}  // namespace
}  // namespace h3::kernels::flash
