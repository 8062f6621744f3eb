// The fp32-arithmetic attention kernels (AttentionPrefillCuda,
// AttentionDecodeCuda) with a 16-bit KV cache of io_type (label gpu: these
// skip without a device; the argument checks run everywhere):
// - the cache: bit for bit the same kernel's fp32-cache run's rotated keys
//   and values (its prefix the 16-bit prefix, widened) rounded once;
// - the output: the CPU twin's with the same 16-bit cache and io_type,
//   within the fp32 kernels' bound plus one ulp of the type; the twin's
//   cache, within one ulp (the GPU's sin/cos may flip an fp32 rounding).
// A cache neither fp32 nor of io_type: refused (prefill) or, on the device,
// that sequence's output NaN and its cache untouched (decode).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/element_type.h"
#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/test_copies.h"
#include "tests/support/gpu_test.h"
#include "tests/support/half_io.h"
#include "tests/support/half_ulp.h"
#include "tests/support/inv_freq.h"
#include "tests/support/random.h"

namespace h3::kernels {
namespace {

using h3::testing::ExpectWithinUlp;
using h3::testing::HalfBits;
using h3::testing::HalfValues;
using h3::testing::InvFreq;
using h3::testing::RandomNormal;
using Typed = h3::testing::TypedTensor;

// Keys of two 16-bit caches within one ulp of each other.
void ExpectKeysWithinUlp(const std::vector<uint16_t>& got,
                         const std::vector<uint16_t>& want, ElementType type) {
  ExpectWithinUlp(got, want, type, 0);
}

class AttentionKvGpuTest : public h3::testing::GpuTestWithParam<ElementType> {};

// A chunk of 150 tokens after 70 in the cache; head_dim 64, partial rotary.
TEST_P(AttentionKvGpuTest, Prefill) {
  const ElementType type = GetParam();
  const AttentionShape s{4, 64, 32};
  const int64_t d = s.d_model(), prefix = 70, len = 150, cap = 230;
  const Typed qkv(RandomNormal(len * 3 * d, 1), type);
  const std::vector<float> inv_freq = InvFreq(s.rotary_dim);
  const Typed k(RandomNormal(cap * d, 2), type),
      v(RandomNormal(cap * d, 3), type);

  DeviceBuffer d_qkv, d_freq, d_k16, d_v16, d_k32, d_v32, d_out16, d_out32;
  ASSERT_CUDA_OK(Upload(qkv.bytes, &d_qkv));
  ASSERT_CUDA_OK(Upload(inv_freq, &d_freq));
  ASSERT_CUDA_OK(Upload(k.bytes, &d_k16));
  ASSERT_CUDA_OK(Upload(v.bytes, &d_v16));
  ASSERT_CUDA_OK(Upload(k.Values(), &d_k32));
  ASSERT_CUDA_OK(Upload(v.Values(), &d_v32));
  ASSERT_CUDA_OK(d_out16.Reserve(len * d * 2));
  ASSERT_CUDA_OK(d_out32.Reserve(len * d * 2));
  AttentionParams p{s,
                    prefix,
                    len,
                    d_qkv.get(),
                    d_freq.as<float>(),
                    {d_k16.get(), d_v16.get(), cap, type},
                    d_out16.get(),
                    type};
  ASSERT_CUDA_OK(AttentionPrefillCuda(p, nullptr));
  p.cache = {d_k32.get(), d_v32.get(), cap};
  p.out = d_out32.get();
  ASSERT_CUDA_OK(AttentionPrefillCuda(p, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());

  const std::vector<uint16_t> k16 = Fetch<uint16_t>(d_k16, cap * d);
  const std::vector<uint16_t> v16 = Fetch<uint16_t>(d_v16, cap * d);
  EXPECT_EQ(k16, HalfBits(Fetch<float>(d_k32, cap * d), type));
  EXPECT_EQ(v16, HalfBits(Fetch<float>(d_v32, cap * d), type));

  Typed cpu_k = k, cpu_v = v;
  std::vector<uint16_t> cpu_out(len * d);
  AttentionCpu({s,
                prefix,
                len,
                qkv.bytes.data(),
                inv_freq.data(),
                {cpu_k.bytes.data(), cpu_v.bytes.data(), cap, type},
                cpu_out.data(),
                type});
  // mixer_half_io_test's bound for this shape (fp32 caches).
  ExpectWithinUlp(Fetch<uint16_t>(d_out16, len * d), cpu_out, type, 1e-5);
  ExpectKeysWithinUlp(k16, cpu_k.Bits(), type);
  EXPECT_EQ(v16, cpu_v.Bits());
}

// Three sequences, one at position 0, one at the cache's end, one across
// pieces of the split softmax; the 1.3B model's head shape.
TEST_P(AttentionKvGpuTest, Decode) {
  const ElementType type = GetParam();
  const AttentionShape s{2, 128, 64};
  const int64_t d = s.d_model(), cap = 600;
  const int batch = 3;
  const Typed qkv(RandomNormal(batch * 3 * d, 11), type);
  const std::vector<float> inv_freq = InvFreq(s.rotary_dim);
  const std::vector<int64_t> positions = {0, 599, 300};
  const Typed k(RandomNormal(batch * cap * d, 12), type);
  const Typed v(RandomNormal(batch * cap * d, 13), type);
  const size_t work = AttentionDecodeWorkspaceBytes(s, batch, cap);

  DeviceBuffer d_qkv, d_freq, d_pos, d_out16, d_out32, d_work;
  DeviceBuffer d_k16, d_v16, d_k32, d_v32, d_caches16, d_caches32;
  ASSERT_CUDA_OK(Upload(qkv.bytes, &d_qkv));
  ASSERT_CUDA_OK(Upload(inv_freq, &d_freq));
  ASSERT_CUDA_OK(Upload(positions, &d_pos));
  ASSERT_CUDA_OK(Upload(k.bytes, &d_k16));
  ASSERT_CUDA_OK(Upload(v.bytes, &d_v16));
  ASSERT_CUDA_OK(Upload(k.Values(), &d_k32));
  ASSERT_CUDA_OK(Upload(v.Values(), &d_v32));
  std::vector<KvCache> caches16, caches32;
  for (int b = 0; b < batch; ++b) {
    caches16.push_back({d_k16.as<uint16_t>() + b * cap * d,
                        d_v16.as<uint16_t>() + b * cap * d, cap, type});
    caches32.push_back({d_k32.as<float>() + b * cap * d,
                        d_v32.as<float>() + b * cap * d, cap});
  }
  ASSERT_CUDA_OK(Upload(caches16, &d_caches16));
  ASSERT_CUDA_OK(Upload(caches32, &d_caches32));
  ASSERT_CUDA_OK(d_out16.Reserve(batch * d * 2));
  ASSERT_CUDA_OK(d_out32.Reserve(batch * d * 2));
  ASSERT_CUDA_OK(d_work.Reserve(work));
  AttentionDecodeParams p{s,
                          batch,
                          d_qkv.get(),
                          d_freq.as<float>(),
                          d_caches16.as<KvCache>(),
                          d_pos.as<int64_t>(),
                          d_out16.get(),
                          type};
  ASSERT_CUDA_OK(AttentionDecodeCuda(p, cap, d_work.get(), work, nullptr));
  p.caches = d_caches32.as<KvCache>();
  p.out = d_out32.get();
  ASSERT_CUDA_OK(AttentionDecodeCuda(p, cap, d_work.get(), work, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());

  const size_t n = batch * cap * d;
  const std::vector<uint16_t> k16 = Fetch<uint16_t>(d_k16, n);
  const std::vector<uint16_t> v16 = Fetch<uint16_t>(d_v16, n);
  EXPECT_EQ(k16, HalfBits(Fetch<float>(d_k32, n), type));
  EXPECT_EQ(v16, HalfBits(Fetch<float>(d_v32, n), type));

  Typed cpu_k = k, cpu_v = v;
  std::vector<KvCache> cpu_caches;
  for (int b = 0; b < batch; ++b) {
    cpu_caches.push_back({cpu_k.bytes.data() + b * cap * d * 2,
                          cpu_v.bytes.data() + b * cap * d * 2, cap, type});
  }
  std::vector<uint16_t> cpu_out(batch * d);
  AttentionDecodeCpu({s, batch, qkv.bytes.data(), inv_freq.data(),
                      cpu_caches.data(), positions.data(), cpu_out.data(),
                      type});
  ExpectWithinUlp(Fetch<uint16_t>(d_out16, batch * d), cpu_out, type, 1e-5);
  ExpectKeysWithinUlp(k16, cpu_k.Bits(), type);
  EXPECT_EQ(v16, cpu_v.Bits());
}

// A batch whose middle sequence's cache is of the other 16-bit type: that
// sequence gets NaNs and its cache stays as it was; the others are served
// as if alone.
TEST_P(AttentionKvGpuTest, DecodeLeavesACacheOfAnotherTypeAlone) {
  const ElementType type = GetParam();
  const ElementType other =
      type == ElementType::kF16 ? ElementType::kBF16 : ElementType::kF16;
  const AttentionShape s{2, 64, 0};
  const int64_t d = s.d_model(), cap = 40;
  const int batch = 3;
  const Typed qkv(RandomNormal(batch * 3 * d, 21), type);
  const std::vector<int64_t> positions = {5, 9, 39};
  const Typed k(RandomNormal(batch * cap * d, 22), type);
  const Typed v(RandomNormal(batch * cap * d, 23), type);
  const size_t work = AttentionDecodeWorkspaceBytes(s, batch, cap);
  DeviceBuffer d_qkv, d_pos, d_out, d_work, d_k, d_v, d_caches;
  ASSERT_CUDA_OK(Upload(qkv.bytes, &d_qkv));
  ASSERT_CUDA_OK(Upload(positions, &d_pos));
  ASSERT_CUDA_OK(Upload(k.bytes, &d_k));
  ASSERT_CUDA_OK(Upload(v.bytes, &d_v));
  std::vector<KvCache> caches;
  for (int b = 0; b < batch; ++b) {
    caches.push_back({d_k.as<uint16_t>() + b * cap * d,
                      d_v.as<uint16_t>() + b * cap * d, cap,
                      b == 1 ? other : type});
  }
  ASSERT_CUDA_OK(Upload(caches, &d_caches));
  ASSERT_CUDA_OK(d_out.Reserve(batch * d * 2));
  ASSERT_CUDA_OK(d_work.Reserve(work));
  ASSERT_CUDA_OK(AttentionDecodeCuda(
      {s, batch, d_qkv.get(), nullptr, d_caches.as<KvCache>(),
       d_pos.as<int64_t>(), d_out.get(), type},
      cap, d_work.get(), work, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());

  const std::vector<float> out =
      HalfValues(Fetch<uint16_t>(d_out, batch * d), type);
  const std::vector<uint16_t> k_after = Fetch<uint16_t>(d_k, batch * cap * d);
  const std::vector<uint16_t> v_after = Fetch<uint16_t>(d_v, batch * cap * d);
  const std::vector<uint16_t> k_before = k.Bits(), v_before = v.Bits();
  for (int64_t i = cap * d; i < 2 * cap * d; ++i) {
    ASSERT_EQ(k_after[i], k_before[i]) << i;
    ASSERT_EQ(v_after[i], v_before[i]) << i;
  }
  for (int64_t e = d; e < 2 * d; ++e) ASSERT_TRUE(std::isnan(out[e])) << e;

  Typed cpu_k = k, cpu_v = v;
  const std::vector<uint16_t> all = Fetch<uint16_t>(d_out, batch * d);
  for (int b : {0, 2}) {
    SCOPED_TRACE(::testing::Message() << "sequence " << b);
    const KvCache cache{cpu_k.bytes.data() + b * cap * d * 2,
                        cpu_v.bytes.data() + b * cap * d * 2, cap, type};
    std::vector<uint16_t> want(d);
    AttentionDecodeCpu({s, 1, qkv.bytes.data() + b * 3 * d * 2, nullptr, &cache,
                        &positions[b], want.data(), type});
    const std::vector<uint16_t> got(all.begin() + b * d,
                                    all.begin() + (b + 1) * d);
    ExpectWithinUlp(got, want, type, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, AttentionKvGpuTest,
                         ::testing::Values(ElementType::kF16,
                                           ElementType::kBF16),
                         [](const auto& info) {
                           return std::string(ElementTypeName(info.param));
                         });

// Prefill refuses, before any launch, a cache neither fp32 nor of io_type
// (no device needed: nothing is dereferenced).
TEST(AttentionKvArgumentsTest, PrefillRefusesOtherCacheTypes) {
  std::vector<float> host(4096);
  float* fake = host.data();
  struct Combo {
    ElementType cache, io;
  };
  for (const Combo& c : {Combo{ElementType::kF16, ElementType::kF32},
                         Combo{ElementType::kBF16, ElementType::kF16},
                         Combo{ElementType::kF16, ElementType::kBF16},
                         Combo{ElementType::kI16, ElementType::kF16}}) {
    SCOPED_TRACE(::testing::Message() << "cache " << ElementTypeName(c.cache)
                                      << " io " << ElementTypeName(c.io));
    AttentionParams p{
        {2, 8, 0}, 0, 1, fake, nullptr, {fake, fake, 8, c.cache}, fake, c.io};
    EXPECT_EQ(AttentionPrefillCuda(p, nullptr), cudaErrorInvalidValue);
  }
}

}  // namespace
}  // namespace h3::kernels
