// The tensor-core prefill attention kernel against its CPU emulation
// (label gpu: these skip without a device; the argument checks run
// everywhere, as they touch no device). The emulation itself is checked
// against AttentionCpu in kernels/cpu/flash_attention_emulation_test.cc.
//
// Bound per output element (tests/support/flash_attention_cases.h, Bound):
// kernel and emulation round the same operands (the caches must agree to
// the fp32 rounding of the GPU's fp64 sin/cos), but sum each score in a
// different order (the MMA's internal order against k16 steps of exact
// sums) and evaluate exp2 differently (exp2f within 2 ulps): each side's
// fp32 weight is within ScoreError of the exact one. Where the two fp32
// weights straddle a rounding boundary of the half type, the rounded
// weights differ by one step, a relative 2u (u = 2^-11 fp16, 2^-8 bf16).
// So delta = (1 + 2u)(1 + ScoreError)^2 - 1 for the weights, and each side
// has its own fp32 accumulation roundings (the denominators also sum in a
// different order: per lane, then across the quad). A fragment or mask
// error is off by O(spread) in some row; a key seen twice or not at all in
// row t by about spread / (t + 1), caught for t < 1 / (2u).
#include "kernels/cuda/flash_attention.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/test_copies.h"
#include "tests/support/flash_attention_cases.h"
#include "tests/support/gpu_test.h"
#include "tests/support/half_io.h"
#include "tests/support/normalised_error.h"

namespace h3::kernels::flash {
namespace {

using h3::testing::HalfBits;
using h3::testing::HalfInput;
using h3::testing::HalfValues;
using h3::testing::TypedTensor;

// The emulation's cases, and 40 short sequences (two launches of at most
// kMaxSequencesPerLaunch).
std::vector<Case> GpuCases() {
  std::vector<Case> cases = Cases();
  Case many{2, 64, 32, ElementType::kF16, {}};
  for (int i = 0; i < 40; ++i) many.chunks.push_back({3 * i, i % 7 + 1});
  cases.push_back(many);
  many.type = ElementType::kBF16;
  cases.push_back(many);
  return cases;
}

class FlashAttentionGpuTest : public h3::testing::GpuTestWithParam<Case> {};

TEST_P(FlashAttentionGpuTest, MatchesEmulation) {
  const Case& c = GetParam();
  const Inputs in = MakeInputs(c, 7);
  const int64_t d = in.shape.d_model();
  const size_t n = c.chunks.size();

  DeviceBuffer d_qkv, d_freq, d_out;
  std::vector<DeviceBuffer> d_k(n), d_v(n);
  ASSERT_CUDA_OK(Upload(in.qkv, &d_qkv));
  ASSERT_CUDA_OK(Upload(in.inv_freq, &d_freq));
  ASSERT_CUDA_OK(d_out.Reserve(in.rows * d * sizeof(float)));
  std::vector<std::vector<float>> emu_k = in.k, emu_v = in.v;
  std::vector<Sequence> host_seqs, device_seqs;
  int64_t row = 0;
  for (size_t s = 0; s < n; ++s) {
    const Chunk& ch = c.chunks[s];
    ASSERT_CUDA_OK(Upload(in.k[s], &d_k[s]));
    ASSERT_CUDA_OK(Upload(in.v[s], &d_v[s]));
    const int64_t cap = in.Capacity(ch);
    host_seqs.push_back(
        {ch.prefix, ch.length, row, {emu_k[s].data(), emu_v[s].data(), cap}});
    device_seqs.push_back({ch.prefix,
                           ch.length,
                           row,
                           {d_k[s].as<float>(), d_v[s].as<float>(), cap}});
    row += ch.length;
  }
  const int count = static_cast<int>(n);
  ASSERT_CUDA_OK(FlashAttentionPrefillCuda(
      {in.shape, c.type, count, device_seqs.data(), d_qkv.as<float>(),
       c.rotary_dim > 0 ? d_freq.as<float>() : nullptr, d_out.as<float>()},
      nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> gpu_out(in.rows * d), emu_out(in.rows * d);
  ASSERT_CUDA_OK(Download(d_out, &gpu_out));
  FlashAttentionEmulation({in.shape, c.type, count, host_seqs.data(),
                           in.qkv.data(), in.freq(), emu_out.data()});

  std::vector<std::vector<float>> gpu_k(n), gpu_v(n);
  for (size_t s = 0; s < n; ++s) {
    gpu_k[s].resize(emu_k[s].size());
    gpu_v[s].resize(emu_v[s].size());
    ASSERT_CUDA_OK(Download(d_k[s], &gpu_k[s]));
    ASSERT_CUDA_OK(Download(d_v[s], &gpu_v[s]));
  }
  const double worst = ExpectKernelMatchesEmulation(
      c, in, host_seqs, gpu_k, gpu_v, gpu_out.data(), emu_k, emu_v,
      emu_out.data());
  RecordProperty("worst_error_over_bound", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashAttentionGpuTest,
                         ::testing::ValuesIn(GpuCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = CaseName(info.param);
                           if (info.param.chunks.size() > 8) {
                             name = name.substr(0, name.find("_0p")) +
                                    "_40sequences";
                           }
                           return name;
                         });

class FlashAttentionHalfIoGpuTest
    : public h3::testing::GpuTestWithParam<ElementType> {};

// 16-bit qkv and out (io_type = the operand type), packed sequences with a
// prefix, head_dim 64 and 128. Bitwise: the 16-bit run stores its own fp32
// run (io_type kF32 on the exactly widened qkv) rounded once, and writes the
// same caches; a third run with 16-bit caches of the type (their prefixes
// the fp32 ones rounded) stores the same bits as the 16-bit run, its tiles
// being copies of what the fp32 caches' tiles round to, and its caches hold
// the fp32 caches rounded. Against the emulation with the same io_type (and
// with 16-bit caches: bitwise the same): the bound above, plus one ulp of
// the type at the output.
TEST_P(FlashAttentionHalfIoGpuTest, IsRoundedFp32RunAndMatchesEmulation) {
  const ElementType type = GetParam();
  for (const Case& c : {Case{2, 64, 32, type, {{0, 17}, {64, 65}}},
                        Case{1, 128, 0, type, {{0, 300}}}}) {
    SCOPED_TRACE(CaseName(c));
    const Inputs in = MakeInputs(c, 31);
    const int64_t d = in.shape.d_model();
    const size_t n = c.chunks.size();
    const HalfInput qkv(in.qkv, type);
    DeviceBuffer d_bits, d_values, d_freq, d_out16, d_out32;
    std::vector<DeviceBuffer> d_k(3 * n), d_v(3 * n);
    ASSERT_CUDA_OK(Upload(qkv.bits, &d_bits));
    ASSERT_CUDA_OK(Upload(qkv.values, &d_values));
    ASSERT_CUDA_OK(Upload(in.inv_freq, &d_freq));
    ASSERT_CUDA_OK(d_out16.Reserve(in.rows * d * 2));
    ASSERT_CUDA_OK(d_out32.Reserve(in.rows * d * 4));
    std::vector<std::vector<float>> emu_k = in.k, emu_v = in.v;
    std::vector<Sequence> seqs16, seqs32, seqs_kv16, host_seqs, host_kv16;
    std::vector<TypedTensor> emu_k16, emu_v16;
    int64_t row = 0;
    for (size_t s = 0; s < n; ++s) {
      const Chunk& ch = c.chunks[s];
      const int64_t cap = in.Capacity(ch);
      for (size_t i : {s, n + s}) {
        ASSERT_CUDA_OK(Upload(in.k[s], &d_k[i]));
        ASSERT_CUDA_OK(Upload(in.v[s], &d_v[i]));
        (i == s ? seqs16 : seqs32)
            .push_back({ch.prefix,
                        ch.length,
                        row,
                        {d_k[i].as<float>(), d_v[i].as<float>(), cap}});
      }
      emu_k16.emplace_back(in.k[s], type);
      emu_v16.emplace_back(in.v[s], type);
      ASSERT_CUDA_OK(Upload(emu_k16[s].bytes, &d_k[2 * n + s]));
      ASSERT_CUDA_OK(Upload(emu_v16[s].bytes, &d_v[2 * n + s]));
      seqs_kv16.push_back(
          {ch.prefix,
           ch.length,
           row,
           {d_k[2 * n + s].get(), d_v[2 * n + s].get(), cap, type}});
      host_seqs.push_back(
          {ch.prefix, ch.length, row, {emu_k[s].data(), emu_v[s].data(), cap}});
      row += ch.length;
    }
    for (size_t s = 0; s < n; ++s) {  // after the loop: no more emplace_back
      host_kv16.push_back(host_seqs[s]);
      host_kv16[s].cache = {emu_k16[s].bytes.data(), emu_v16[s].bytes.data(),
                            host_seqs[s].cache.capacity, type};
    }
    const int count = static_cast<int>(n);
    const float* freq = c.rotary_dim > 0 ? d_freq.as<float>() : nullptr;
    ASSERT_CUDA_OK(
        FlashAttentionPrefillCuda({in.shape, type, count, seqs16.data(),
                                   d_bits.get(), freq, d_out16.get(), type},
                                  nullptr));
    ASSERT_CUDA_OK(FlashAttentionPrefillCuda(
        {in.shape, type, count, seqs32.data(), d_values.get(), freq,
         d_out32.get(), ElementType::kF32},
        nullptr));
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<uint16_t> out16 = Fetch<uint16_t>(d_out16, in.rows * d);
    EXPECT_EQ(out16, HalfBits(Fetch<float>(d_out32, in.rows * d), type));
    for (size_t s = 0; s < n; ++s) {
      EXPECT_EQ(Fetch<float>(d_k[s], in.k[s].size()),
                Fetch<float>(d_k[n + s], in.k[s].size()));
      EXPECT_EQ(Fetch<float>(d_v[s], in.v[s].size()),
                Fetch<float>(d_v[n + s], in.v[s].size()));
    }
    ASSERT_CUDA_OK(
        FlashAttentionPrefillCuda({in.shape, type, count, seqs_kv16.data(),
                                   d_bits.get(), freq, d_out32.get(), type},
                                  nullptr));
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(Fetch<uint16_t>(d_out32, in.rows * d), out16);
    for (size_t s = 0; s < n; ++s) {
      EXPECT_EQ(Fetch<uint16_t>(d_k[2 * n + s], in.k[s].size()),
                HalfBits(Fetch<float>(d_k[s], in.k[s].size()), type));
      EXPECT_EQ(Fetch<uint16_t>(d_v[2 * n + s], in.v[s].size()),
                HalfBits(Fetch<float>(d_v[s], in.v[s].size()), type));
    }

    // One ulp of the type at the output o is at most 2u |o| + 2^-24, and
    // |o| <= mag.
    std::vector<uint16_t> emu16(in.rows * d);
    FlashAttentionEmulation({in.shape, type, count, host_seqs.data(),
                             qkv.bits.data(), in.freq(), emu16.data(), type});
    std::vector<uint16_t> emu_kv16(in.rows * d);
    FlashAttentionEmulation({in.shape, type, count, host_kv16.data(),
                             qkv.bits.data(), in.freq(), emu_kv16.data(),
                             type});
    EXPECT_EQ(emu_kv16, emu16);
    const std::vector<float> got = HalfValues(out16, type);
    const std::vector<float> want = HalfValues(emu16, type);
    const double u = UnitRoundoff(type);
    double worst = 0;
    for (size_t s = 0; s < n; ++s) {
      const Chunk& ch = c.chunks[s];
      const int64_t r0 = host_seqs[s].row;
      const std::vector<float> chunk_qkv(
          qkv.values.begin() + r0 * 3 * d,
          qkv.values.begin() + (r0 + ch.length) * 3 * d);
      const Operands rounded =
          MakeOperands(in, ch, chunk_qkv, emu_k[s], emu_v[s], &type);
      const int hd = c.head_dim;
      EXPECT_EQ(0,
                CompareRows(
                    in, ch, rounded, got.data() + r0 * d, want.data() + r0 * d,
                    [&](const RowSpread& r, int i, int64_t keys) {
                      const double e = ScoreError(hd, r.max_abs_dot);
                      const double delta = (1 + 2 * u) * (1 + e) * (1 + e) - 1;
                      return Bound(delta, r.spread[i], r.mag[i], keys) +
                             Bound(0, 0, r.mag[i], keys) + 2 * u * r.mag[i] +
                             std::ldexp(1.0, -24);
                    },
                    &worst));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, FlashAttentionHalfIoGpuTest,
                         ::testing::Values(ElementType::kF16,
                                           ElementType::kBF16),
                         [](const auto& info) {
                           return std::string(ElementTypeName(info.param));
                         });

}  // namespace
}  // namespace h3::kernels::flash
