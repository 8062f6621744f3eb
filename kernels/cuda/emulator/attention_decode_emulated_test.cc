// The GPU decode attention (AttentionDecodeCuda: the cache write, the
// pieces, the combine) run on the CPU by the emulator
// (attention_decode_emulated.cc) against the CPU twin AttentionDecodeCpu,
// as kernels/cuda/attention_kv_test.cc holds it on a GPU: 16-bit caches
// and io of the 1.3B model's head shape, fp32 caches with heads of 128, 64
// and 8, and a 16-bit head of 24 (dims past a lane's share). A capacity
// of 8192 makes pieces of 128 keys, eight steps of each warp; the
// positions cover a first, a middle and a last piece.
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "base/element_type.h"
#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/cuda/attention.h"
#include "tests/support/half_io.h"
#include "tests/support/half_ulp.h"
#include "tests/support/inv_freq.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"

namespace h3::kernels {
namespace {

using h3::testing::ExpectWithinUlp;
using h3::testing::InvFreq;
using h3::testing::NormalisedError;
using h3::testing::RandomNormal;
using Typed = h3::testing::TypedTensor;

struct DecodeCase {
  int heads, head_dim, rotary_dim;
  ElementType type;  // of the caches, qkv and out
  int64_t capacity;
  std::vector<int64_t> positions;
};

std::ostream& operator<<(std::ostream& os, const DecodeCase& c) {
  os << c.heads << "x" << c.head_dim << "_rot" << c.rotary_dim << "_"
     << ElementTypeName(c.type) << "_cap" << c.capacity;
  for (int64_t pos : c.positions) os << "_" << pos;
  return os;
}

class AttentionDecodeEmulatedTest
    : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(AttentionDecodeEmulatedTest, MatchesTheCpuTwin) {
  const DecodeCase& c = GetParam();
  const AttentionShape s{c.heads, c.head_dim, c.rotary_dim};
  const int64_t d = s.d_model(), cap = c.capacity;
  const int batch = static_cast<int>(c.positions.size());
  const size_t size = ElementSize(c.type);
  const Typed qkv(RandomNormal(batch * 3 * d, 31), c.type);
  const std::vector<float> inv_freq = InvFreq(s.rotary_dim);
  const Typed k(RandomNormal(batch * cap * d, 32), c.type);
  const Typed v(RandomNormal(batch * cap * d, 33), c.type);

  // The emulator's device memory is the host's: both sides get copies.
  Typed gpu_k = k, gpu_v = v, cpu_k = k, cpu_v = v;
  std::vector<KvCache> gpu_caches, cpu_caches;
  for (int b = 0; b < batch; ++b) {
    const size_t at = b * cap * d * size;
    gpu_caches.push_back(
        {gpu_k.bytes.data() + at, gpu_v.bytes.data() + at, cap, c.type});
    cpu_caches.push_back(
        {cpu_k.bytes.data() + at, cpu_v.bytes.data() + at, cap, c.type});
  }
  const size_t work_bytes = AttentionDecodeWorkspaceBytes(s, batch, cap);
  std::vector<float> work(work_bytes / sizeof(float));
  std::vector<unsigned char> gpu_out(batch * d * size), cpu_out(gpu_out.size());
  const float* freq = s.rotary_dim > 0 ? inv_freq.data() : nullptr;
  ASSERT_EQ(
      AttentionDecodeCuda({s, batch, qkv.bytes.data(), freq, gpu_caches.data(),
                           c.positions.data(), gpu_out.data(), c.type},
                          cap, work.data(), work_bytes, nullptr),
      cudaSuccess);
  AttentionDecodeCpu({s, batch, qkv.bytes.data(), freq, cpu_caches.data(),
                      c.positions.data(), cpu_out.data(), c.type});

  // attention_kv_test.cc's bounds: fp32 sums in another order (1e-5 of the
  // largest output), one ulp of a 16-bit type; the caches' new rows within
  // one ulp of each other (the two sides' sin and cos may differ).
  if (c.type == ElementType::kF32) {
    std::vector<float> g(batch * d), w(batch * d);
    std::memcpy(g.data(), gpu_out.data(), gpu_out.size());
    std::memcpy(w.data(), cpu_out.data(), cpu_out.size());
    EXPECT_LT(NormalisedError(g, w), 1e-5);
    EXPECT_LT(NormalisedError(gpu_k.Values(), cpu_k.Values()), 1e-6);
    EXPECT_EQ(gpu_v.bytes, cpu_v.bytes);
  } else {
    std::vector<uint16_t> g(batch * d), w(batch * d);
    std::memcpy(g.data(), gpu_out.data(), gpu_out.size());
    std::memcpy(w.data(), cpu_out.data(), cpu_out.size());
    ExpectWithinUlp(g, w, c.type, 1e-5);
    ExpectWithinUlp(gpu_k.Bits(), cpu_k.Bits(), c.type, 0);
    EXPECT_EQ(gpu_v.bytes, cpu_v.bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionDecodeEmulatedTest,
    ::testing::Values(
        DecodeCase{2, 128, 64, ElementType::kF16, 8192, {300, 0, 127, 129}},
        DecodeCase{2, 128, 64, ElementType::kBF16, 600, {599, 5}},
        DecodeCase{2, 128, 0, ElementType::kF32, 8192, {257}},
        DecodeCase{2, 64, 32, ElementType::kF32, 8192, {200, 64}},
        DecodeCase{3, 8, 8, ElementType::kF32, 8192, {130, 1}},
        DecodeCase{2, 24, 8, ElementType::kF16, 300, {299, 64}}),
    ::testing::PrintToStringParamName());

}  // namespace
}  // namespace h3::kernels
