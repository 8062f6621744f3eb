// AttentionPrefillPackedCuda (label gpu: these skip without a device; the
// argument checks run everywhere): its outputs and caches are, byte for
// byte, those of one AttentionPrefillCuda call per segment; a bad segment
// among good ones is refused before anything is written.
#include <cuda_runtime_api.h>

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
#include "tests/support/inv_freq.h"
#include "tests/support/random.h"

namespace h3::kernels {
namespace {

using h3::testing::InvFreq;
using h3::testing::RandomNormal;
using Typed = h3::testing::TypedTensor;

struct Types {
  ElementType io, cache;
};

const AttentionShape kShape{2, 64, 32};
const int64_t kD = kShape.d_model();

// More segments than one launch takes: lengths 1, 37, 130, 300 in turn,
// every other one after a prefix already in its cache.
std::vector<AttentionSegmentCall> Segments(int count) {
  const int64_t lengths[] = {1, 37, 130, 300};
  std::vector<AttentionSegmentCall> segs;
  int64_t row = 0, offset = 0;  // offset: of the cache, in positions
  for (int i = 0; i < count; ++i) {
    const int64_t start = i % 2 == 0 ? 0 : 11 + 3 * i;
    const int64_t length = lengths[i % 4];
    AttentionSegmentCall s{start, length, row, {}};
    s.cache.capacity = start + length + 2;
    s.cache.k = reinterpret_cast<void*>(offset);  // made a pointer later
    segs.push_back(s);
    row += length;
    offset += s.cache.capacity;
  }
  return segs;
}

class AttentionPackedGpuTest : public h3::testing::GpuTestWithParam<Types> {};

TEST_P(AttentionPackedGpuTest, SegmentsGetTheBitsOfOneCallEach) {
  const Types t = GetParam();
  const int count = kPrefillSegmentsPerLaunch + 5;
  std::vector<AttentionSegmentCall> segs = Segments(count);
  const int64_t rows = segs.back().row + segs.back().length;
  const int64_t positions = reinterpret_cast<int64_t>(segs.back().cache.k) +
                            segs.back().cache.capacity;
  const size_t io = ElementSize(t.io), cs = ElementSize(t.cache);
  const Typed qkv(RandomNormal(rows * 3 * kD, 1), t.io);
  const Typed prefix_qkv(RandomNormal(200 * 3 * kD, 2), t.io);
  const std::vector<float> inv_freq = InvFreq(kShape.rotary_dim);

  DeviceBuffer d_qkv, d_prefix, d_freq, d_scratch, ka, va, kb, vb, oa, ob;
  ASSERT_CUDA_OK(Upload(qkv.bytes, &d_qkv));
  ASSERT_CUDA_OK(Upload(prefix_qkv.bytes, &d_prefix));
  ASSERT_CUDA_OK(Upload(inv_freq, &d_freq));
  const size_t cache_bytes = positions * kD * cs, out_bytes = rows * kD * io;
  for (DeviceBuffer* b : {&ka, &va, &kb, &vb}) {
    ASSERT_CUDA_OK(b->Reserve(cache_bytes));
    ASSERT_CUDA_OK(cudaMemset(b->get(), 0, cache_bytes));
  }
  for (DeviceBuffer* b : {&oa, &ob, &d_scratch}) {
    ASSERT_CUDA_OK(b->Reserve(out_bytes));
  }
  ASSERT_CUDA_OK(cudaMemset(oa.get(), 0x5a, out_bytes));
  ASSERT_CUDA_OK(cudaMemset(ob.get(), 0x5a, out_bytes));

  // Caches a (packed) and b (one call each); the prefixes by an earlier call.
  std::vector<AttentionSegmentCall> segs_b = segs;
  for (size_t i = 0; i < segs.size(); ++i) {
    const size_t off = reinterpret_cast<size_t>(segs[i].cache.k) * kD * cs;
    segs[i].cache = {ka.as<char>() + off, va.as<char>() + off,
                     segs[i].cache.capacity, t.cache};
    segs_b[i].cache = {kb.as<char>() + off, vb.as<char>() + off,
                       segs[i].cache.capacity, t.cache};
    if (segs[i].start > 0) {
      ASSERT_CUDA_OK(AttentionPrefillCuda(
          {kShape, 0, segs[i].start, d_prefix.get(), d_freq.as<float>(),
           segs[i].cache, d_scratch.get(), t.io},
          nullptr));
    }
  }
  ASSERT_CUDA_OK(
      cudaMemcpy(kb.get(), ka.get(), cache_bytes, cudaMemcpyDeviceToDevice));
  ASSERT_CUDA_OK(
      cudaMemcpy(vb.get(), va.get(), cache_bytes, cudaMemcpyDeviceToDevice));

  ASSERT_CUDA_OK(AttentionPrefillPackedCuda(kShape, segs.data(), count,
                                            d_qkv.get(), d_freq.as<float>(),
                                            oa.get(), t.io, nullptr));
  for (const AttentionSegmentCall& s : segs_b) {
    ASSERT_CUDA_OK(AttentionPrefillCuda(
        {kShape, s.start, s.length, d_qkv.as<char>() + s.row * 3 * kD * io,
         d_freq.as<float>(), s.cache, ob.as<char>() + s.row * kD * io, t.io},
        nullptr));
  }
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(Fetch<uint8_t>(oa, out_bytes), Fetch<uint8_t>(ob, out_bytes));
  EXPECT_EQ(Fetch<uint8_t>(ka, cache_bytes), Fetch<uint8_t>(kb, cache_bytes));
  EXPECT_EQ(Fetch<uint8_t>(va, cache_bytes), Fetch<uint8_t>(vb, cache_bytes));
}

// One segment past its cache among good ones: refused, nothing written.
TEST_P(AttentionPackedGpuTest, ABadSegmentStopsEveryLaunch) {
  const Types t = GetParam();
  std::vector<AttentionSegmentCall> segs = Segments(6);
  const int64_t rows = segs.back().row + segs.back().length;
  const int64_t positions = reinterpret_cast<int64_t>(segs.back().cache.k) +
                            segs.back().cache.capacity;
  const size_t cache_bytes = positions * kD * ElementSize(t.cache);
  const size_t out_bytes = rows * kD * ElementSize(t.io);
  const Typed qkv(RandomNormal(rows * 3 * kD, 3), t.io);
  const std::vector<float> inv_freq = InvFreq(kShape.rotary_dim);
  DeviceBuffer d_qkv, d_freq, k, v, out;
  ASSERT_CUDA_OK(Upload(qkv.bytes, &d_qkv));
  ASSERT_CUDA_OK(Upload(inv_freq, &d_freq));
  for (DeviceBuffer* b : {&k, &v}) ASSERT_CUDA_OK(b->Reserve(cache_bytes));
  ASSERT_CUDA_OK(out.Reserve(out_bytes));
  for (DeviceBuffer* b : {&k, &v, &out}) {
    ASSERT_CUDA_OK(
        cudaMemset(b->get(), 0x5a, b == &out ? out_bytes : cache_bytes));
  }
  for (AttentionSegmentCall& s : segs) {
    const size_t off =
        reinterpret_cast<size_t>(s.cache.k) * kD * ElementSize(t.cache);
    s.cache = {k.as<char>() + off, v.as<char>() + off, s.cache.capacity,
               t.cache};
  }
  segs[4].cache.capacity -= 3;  // start + length now past the cache
  EXPECT_EQ(
      AttentionPrefillPackedCuda(kShape, segs.data(), 6, d_qkv.get(),
                                 d_freq.as<float>(), out.get(), t.io, nullptr),
      cudaErrorInvalidValue);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint8_t> pattern(cache_bytes, 0x5a);
  EXPECT_EQ(Fetch<uint8_t>(k, cache_bytes), pattern);
  EXPECT_EQ(Fetch<uint8_t>(v, cache_bytes), pattern);
  EXPECT_EQ(Fetch<uint8_t>(out, out_bytes),
            std::vector<uint8_t>(out_bytes, 0x5a));
}

INSTANTIATE_TEST_SUITE_P(
    Types, AttentionPackedGpuTest,
    ::testing::Values(Types{ElementType::kF32, ElementType::kF32},
                      Types{ElementType::kF16, ElementType::kF32},
                      Types{ElementType::kF16, ElementType::kF16},
                      Types{ElementType::kBF16, ElementType::kF32},
                      Types{ElementType::kBF16, ElementType::kBF16}),
    [](const auto& info) {
      return std::string(ElementTypeName(info.param.io)) + "_io_" +
             std::string(ElementTypeName(info.param.cache)) + "_cache";
    });

// Each kind of bad segment, after good ones, is refused before any launch
// (no device needed: nothing is dereferenced).
TEST(AttentionPackedArgumentsTest, RefusesABadSegmentAmongGoodOnes) {
  std::vector<float> host(4096);
  float* fake = host.data();
  const AttentionShape s{2, 8, 0};
  const AttentionSegmentCall good{2, 3, 0, {fake, fake, 8}};
  std::vector<AttentionSegmentCall> bad(5, good);
  bad[0].start = -1;
  bad[1].cache.capacity = 4;  // start + length past it
  bad[2].row = -1;
  bad[3].cache.k = nullptr;
  bad[4].cache.type = ElementType::kF16;  // io fp32
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "bad " << i);
    const std::vector<AttentionSegmentCall> segs = {good, good, bad[i]};
    EXPECT_EQ(AttentionPrefillPackedCuda(s, segs.data(), 3, fake, nullptr, fake,
                                         ElementType::kF32, nullptr),
              cudaErrorInvalidValue);
  }
  EXPECT_EQ(AttentionPrefillPackedCuda(s, nullptr, 1, fake, nullptr, fake,
                                       ElementType::kF32, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(AttentionPrefillPackedCuda(s, &good, -1, fake, nullptr, fake,
                                       ElementType::kF32, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace h3::kernels
