// The sequence mixers' CUDA kernels with 16-bit I/O (io_type kF16 / kBF16:
// AttentionPrefillCuda, AttentionDecodeCuda, H3StepCuda; the tensor-core
// prefill's tests are in flash_attention_test.cc). Two checks
// per kernel (label gpu: skipped
// without a device):
// - bitwise: the 16-bit run stores exactly its own fp32 run (same kernel,
//   io_type kF32, on the exactly widened inputs) rounded once to the type,
//   and leaves the same fp32 caches and states: the spec's semantics, on the
//   device. The fp32 runs are held to the CPU twins by the existing tests
//   (attention_test, h3_step_test).
// - against the CPU twin (or the emulation) with the same io_type: within
//   the fp32 kernels' bound plus one ulp of the type at the output.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/element_type.h"
#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/h3_step.h"
#include "kernels/cuda/test_copies.h"
#include "kernels/h3.h"
#include "tests/support/gpu_test.h"
#include "tests/support/half_io.h"
#include "tests/support/half_ulp.h"
#include "tests/support/inv_freq.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::ExpectWithinUlp;
using h3::testing::HalfBits;
using h3::testing::HalfInput;
using h3::testing::HalfValues;
using h3::testing::InvFreq;
using h3::testing::RandomNormal;

class MixerHalfIoGpuTest : public h3::testing::GpuTestWithParam<ElementType> {};

// A chunk of 150 tokens after 70 in the cache; head_dim 64, partial rotary.
TEST_P(MixerHalfIoGpuTest, AttentionPrefill) {
  const ElementType type = GetParam();
  const AttentionShape s{4, 64, 32};
  const int64_t d = s.d_model(), prefix = 70, len = 150, cap = 230;
  const HalfInput qkv(RandomNormal(len * 3 * d, 1), type);
  const std::vector<float> inv_freq = InvFreq(s.rotary_dim);
  const std::vector<float> k = RandomNormal(cap * d, 2);
  const std::vector<float> v = RandomNormal(cap * d, 3);

  DeviceBuffer d_bits, d_values, d_freq, d_k16, d_v16, d_k32, d_v32, d_out16,
      d_out32;
  ASSERT_CUDA_OK(Upload(qkv.bits, &d_bits));
  ASSERT_CUDA_OK(Upload(qkv.values, &d_values));
  ASSERT_CUDA_OK(Upload(inv_freq, &d_freq));
  for (DeviceBuffer* b : {&d_k16, &d_k32}) ASSERT_CUDA_OK(Upload(k, b));
  for (DeviceBuffer* b : {&d_v16, &d_v32}) ASSERT_CUDA_OK(Upload(v, b));
  ASSERT_CUDA_OK(d_out16.Reserve(len * d * 2));
  ASSERT_CUDA_OK(d_out32.Reserve(len * d * 4));
  AttentionParams p{s,
                    prefix,
                    len,
                    d_bits.get(),
                    d_freq.as<float>(),
                    {d_k16.as<float>(), d_v16.as<float>(), cap},
                    d_out16.get(),
                    type};
  ASSERT_CUDA_OK(AttentionPrefillCuda(p, nullptr));
  p.qkv = d_values.get();
  p.cache = {d_k32.as<float>(), d_v32.as<float>(), cap};
  p.out = d_out32.get();
  p.io_type = ElementType::kF32;
  ASSERT_CUDA_OK(AttentionPrefillCuda(p, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());

  const std::vector<uint16_t> out16 = Fetch<uint16_t>(d_out16, len * d);
  EXPECT_EQ(out16, HalfBits(Fetch<float>(d_out32, len * d), type));
  const std::vector<float> k16 = Fetch<float>(d_k16, cap * d);
  EXPECT_EQ(k16, Fetch<float>(d_k32, cap * d));
  EXPECT_EQ(Fetch<float>(d_v16, cap * d), Fetch<float>(d_v32, cap * d));

  std::vector<float> cpu_k = k, cpu_v = v;
  std::vector<uint16_t> cpu_out(len * d);
  AttentionCpu({s,
                prefix,
                len,
                qkv.bits.data(),
                inv_freq.data(),
                {cpu_k.data(), cpu_v.data(), cap},
                cpu_out.data(),
                type});
  // attention_test's bound (2x the fp32 reference's error + 2e-6) is about
  // 5e-6 at this shape; 1e-5 on top of the ulp.
  ExpectWithinUlp(out16, cpu_out, type, 1e-5);
  EXPECT_LE(h3::testing::NormalisedError(k16, cpu_k), 1e-6);
}

// Three sequences, one at position 0, one at the cache's end, one across
// pieces of the split softmax.
TEST_P(MixerHalfIoGpuTest, AttentionDecode) {
  const ElementType type = GetParam();
  const AttentionShape s{2, 128, 64};
  const int64_t d = s.d_model(), cap = 600;
  const int batch = 3;
  const HalfInput qkv(RandomNormal(batch * 3 * d, 11), type);
  const std::vector<float> inv_freq = InvFreq(s.rotary_dim);
  const std::vector<int64_t> positions = {0, 599, 300};
  const std::vector<float> k = RandomNormal(batch * cap * d, 12);
  const std::vector<float> v = RandomNormal(batch * cap * d, 13);
  const size_t work = AttentionDecodeWorkspaceBytes(s, batch, cap);

  DeviceBuffer d_bits, d_values, d_freq, d_pos, d_out16, d_out32, d_work;
  DeviceBuffer d_k[2], d_v[2], d_caches[2];
  ASSERT_CUDA_OK(Upload(qkv.bits, &d_bits));
  ASSERT_CUDA_OK(Upload(qkv.values, &d_values));
  ASSERT_CUDA_OK(Upload(inv_freq, &d_freq));
  ASSERT_CUDA_OK(Upload(positions, &d_pos));
  for (int i = 0; i < 2; ++i) {
    ASSERT_CUDA_OK(Upload(k, &d_k[i]));
    ASSERT_CUDA_OK(Upload(v, &d_v[i]));
    std::vector<KvCache> caches;
    for (int b = 0; b < batch; ++b) {
      caches.push_back({d_k[i].as<float>() + b * cap * d,
                        d_v[i].as<float>() + b * cap * d, cap});
    }
    ASSERT_CUDA_OK(Upload(caches, &d_caches[i]));
  }
  ASSERT_CUDA_OK(d_out16.Reserve(batch * d * 2));
  ASSERT_CUDA_OK(d_out32.Reserve(batch * d * 4));
  ASSERT_CUDA_OK(d_work.Reserve(work));
  AttentionDecodeParams p{s,
                          batch,
                          d_bits.get(),
                          d_freq.as<float>(),
                          d_caches[0].as<KvCache>(),
                          d_pos.as<int64_t>(),
                          d_out16.get(),
                          type};
  ASSERT_CUDA_OK(AttentionDecodeCuda(p, cap, d_work.get(), work, nullptr));
  p.qkv = d_values.get();
  p.caches = d_caches[1].as<KvCache>();
  p.out = d_out32.get();
  p.io_type = ElementType::kF32;
  ASSERT_CUDA_OK(AttentionDecodeCuda(p, cap, d_work.get(), work, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());

  const std::vector<uint16_t> out16 = Fetch<uint16_t>(d_out16, batch * d);
  EXPECT_EQ(out16, HalfBits(Fetch<float>(d_out32, batch * d), type));
  EXPECT_EQ(Fetch<float>(d_k[0], k.size()), Fetch<float>(d_k[1], k.size()));
  EXPECT_EQ(Fetch<float>(d_v[0], v.size()), Fetch<float>(d_v[1], v.size()));

  std::vector<float> cpu_k = k, cpu_v = v;
  std::vector<KvCache> caches;
  for (int b = 0; b < batch; ++b) {
    caches.push_back(
        {cpu_k.data() + b * cap * d, cpu_v.data() + b * cap * d, cap});
  }
  std::vector<uint16_t> cpu_out(batch * d);
  AttentionDecodeCpu({s, batch, qkv.bits.data(), inv_freq.data(), caches.data(),
                      positions.data(), cpu_out.data(), type});
  ExpectWithinUlp(out16, cpu_out, type, 1e-5);
}

// The H3 step's two kernels: head_dim 1 (N 64: vectors of 4; N 10: of 2)
// and head_dim 2 (the general kernel); fused q|k|v rows.
TEST_P(MixerHalfIoGpuTest, H3Step) {
  const ElementType type = GetParam();
  for (const H3Shape& shape :
       {H3Shape{256, 1, 64}, H3Shape{40, 1, 10}, H3Shape{24, 2, 16}}) {
    SCOPED_TRACE(::testing::Message()
                 << "d " << shape.d_model << " p " << shape.head_dim << " N "
                 << shape.d_state);
    const h3::testing::RandomH3Layer layer(shape, 21);
    const int batch = 3;
    const int64_t d = shape.d_model;
    const HalfInput qkv(RandomNormal(batch * 3 * d, 22), type);
    const std::vector<int64_t> positions = {64, 100, 1000003};  // >= N
    const size_t ring = d * shape.d_state;
    const size_t diag = 2 * shape.kv_channels() * shape.modes();
    const std::vector<float> state = RandomNormal(batch * (ring + diag), 23);

    const std::vector<float>* arrays[] = {
        &layer.shift_kernel, &layer.shift_D, &layer.dA,
        &layer.dB,           &layer.C,       &layer.D};
    DeviceBuffer w[6], d_bits, d_values, d_pos, d_out16, d_out32;
    DeviceBuffer d_state[2], d_views[2];
    for (int i = 0; i < 6; ++i) ASSERT_CUDA_OK(Upload(*arrays[i], &w[i]));
    const H3Weights dw{shape,
                       w[0].as<float>(),
                       w[1].as<float>(),
                       w[2].as<float>(),
                       w[3].as<float>(),
                       w[4].as<float>(),
                       w[5].as<float>()};
    ASSERT_CUDA_OK(Upload(qkv.bits, &d_bits));
    ASSERT_CUDA_OK(Upload(qkv.values, &d_values));
    ASSERT_CUDA_OK(Upload(positions, &d_pos));
    for (int i = 0; i < 2; ++i) {
      ASSERT_CUDA_OK(Upload(state, &d_state[i]));
      std::vector<H3State> views;
      for (int b = 0; b < batch; ++b) {
        float* base = d_state[i].as<float>() + b * (ring + diag);
        views.push_back({base, base + ring});
      }
      ASSERT_CUDA_OK(Upload(views, &d_views[i]));
    }
    ASSERT_CUDA_OK(d_out16.Reserve(batch * d * 2));
    ASSERT_CUDA_OK(d_out32.Reserve(batch * d * 4));
    const uint16_t* bits = d_bits.as<uint16_t>();
    H3StepParams p{dw,
                   batch,
                   bits,
                   bits + d,
                   bits + 2 * d,
                   d_out16.get(),
                   d_views[0].as<H3State>(),
                   3 * d,
                   d_pos.as<int64_t>(),
                   type};
    ASSERT_CUDA_OK(H3StepCuda(p, nullptr));
    const float* values = d_values.as<float>();
    p.q = values;
    p.k = values + d;
    p.v = values + 2 * d;
    p.out = d_out32.get();
    p.states = d_views[1].as<H3State>();
    p.io_type = ElementType::kF32;
    ASSERT_CUDA_OK(H3StepCuda(p, nullptr));
    ASSERT_CUDA_OK(cudaDeviceSynchronize());

    const std::vector<uint16_t> out16 = Fetch<uint16_t>(d_out16, batch * d);
    EXPECT_EQ(out16, HalfBits(Fetch<float>(d_out32, batch * d), type));
    const std::vector<float> state16 = Fetch<float>(d_state[0], state.size());
    EXPECT_EQ(state16, Fetch<float>(d_state[1], state.size()));

    std::vector<float> cpu_state = state;
    std::vector<H3State> views;
    for (int b = 0; b < batch; ++b) {
      float* base = cpu_state.data() + b * (ring + diag);
      views.push_back({base, base + ring});
    }
    std::vector<uint16_t> cpu_out(batch * d);
    const uint16_t* host_bits = qkv.bits.data();
    H3StepCpu({layer.weights(), batch, host_bits, host_bits + d,
               host_bits + 2 * d, cpu_out.data(), views.data(), 3 * d,
               positions.data(), type});
    // h3_step_test's bound (1e-5, normalised) plus the ulp.
    ExpectWithinUlp(out16, cpu_out, type, 1e-5);
    EXPECT_LE(h3::testing::NormalisedError(state16, cpu_state), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MixerHalfIoGpuTest,
                         ::testing::Values(ElementType::kF16,
                                           ElementType::kBF16),
                         [](const auto& info) {
                           return std::string(ElementTypeName(info.param));
                         });

// An io_type other than fp32, fp16 and bf16 is refused before any launch
// (no device needed: nothing is dereferenced).
TEST(MixerHalfIoArgumentsTest, RejectsOtherIoTypes) {
  std::vector<float> host(4096);
  float* fake = host.data();
  const KvCache cache{fake, fake, 8};
  const int64_t position = 0;
  AttentionParams prefill{{2, 8, 0}, 0, 1, fake, nullptr, cache, fake};
  prefill.io_type = ElementType::kI32;
  EXPECT_EQ(AttentionPrefillCuda(prefill, nullptr), cudaErrorInvalidValue);
  AttentionDecodeParams decode{{2, 8, 0}, 1,         fake, nullptr,
                               &cache,    &position, fake};
  decode.io_type = ElementType::kF64;
  EXPECT_EQ(AttentionDecodeCuda(decode, 8, fake, 1 << 20, nullptr),
            cudaErrorInvalidValue);
  const H3State state{fake, fake};
  H3StepParams step{{{8, 1, 4}, fake, fake, fake, fake, fake, fake},
                    1,
                    fake,
                    fake,
                    fake,
                    fake,
                    &state,
                    0,
                    &position};
  step.io_type = ElementType::kI8;
  EXPECT_EQ(H3StepCuda(step, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace h3::kernels
