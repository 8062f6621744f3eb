// GPU twins vs CPU twins for attention (label gpu: the GPU tests skip without
// a device; the argument checks run everywhere, as they touch no device).
#include "kernels/cuda/attention.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/test_copies.h"
#include "tests/support/gpu_test.h"
#include "tests/support/inv_freq.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"

namespace h3::kernels {
namespace {

using h3::testing::InvFreq;

// GPT-NeoX's inverse frequencies, base 10000.
// One token's attention (all heads) as AttentionCpu defines it, but in fp32
// throughout: fp32 dots, a two-pass softmax and sequential fp32 sums. Its
// error against the CPU twin (which sums in fp64) is what fp32 arithmetic
// costs at this shape; the GPU kernels, also fp32, are held to twice it.
// qkv: [3, heads, head_dim]; k, v: the cache holding the rotated keys.
void Fp32Attention(const AttentionShape& s, const float* qkv, int64_t pos,
                   const float* inv_freq, const float* k, const float* v,
                   float* out) {
  const int hd = s.head_dim, d = s.d_model();
  const float scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<float> q(hd), scores(pos + 1), acc(hd);
  for (int h = 0; h < s.heads; ++h) {
    std::copy(qkv + h * hd, qkv + (h + 1) * hd, q.begin());
    if (s.rotary_dim > 0) ApplyRotary(q.data(), s.rotary_dim, inv_freq, pos);
    float max_score = -INFINITY;
    for (int64_t j = 0; j <= pos; ++j) {
      float dot = 0;
      for (int i = 0; i < hd; ++i) dot += q[i] * k[j * d + h * hd + i];
      scores[j] = dot * scale;
      max_score = std::max(max_score, scores[j]);
    }
    float total = 0;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j = 0; j <= pos; ++j) {
      const float w = std::exp(scores[j] - max_score);
      total += w;
      for (int i = 0; i < hd; ++i) acc[i] += w * v[j * d + h * hd + i];
    }
    for (int i = 0; i < hd; ++i) out[h * hd + i] = acc[i] / total;
  }
}

// Bounds for the comparisons below.
// Outputs: at most twice the fp32 reference's error (STYLE.md), plus 2e-6
// for shapes where that error is ~0 by luck (one key: the output is v
// exactly) while the kernels' different summation order and online rescaling
// still round a few times (a few ulps of 6e-8 at the output's scale). A
// mask off by one key moves the output by ~1/keys of its scale: 2.4e-4 at
// 4096 keys, far above this.
void ExpectOutputClose(const std::vector<float>& gpu,
                       const std::vector<float>& cpu,
                       const std::vector<float>& fp32) {
  const double fp32_err = h3::testing::NormalisedError(fp32, cpu);
  const double gpu_err = h3::testing::NormalisedError(gpu, cpu);
  EXPECT_LE(gpu_err, 2 * fp32_err + 2e-6) << "fp32 reference: " << fp32_err;
}

// Caches: values are copied, so exact; keys are rotated in fp64 from the same
// fp32 angle on both sides, and only CUDA's fp64 sin/cos (within 2 ulps of
// fp64) may flip a rounding to fp32 now and then: one fp32 ulp of one
// element, below 6e-8 of the scale. A wrong rotation is off by O(1).
void ExpectCacheClose(const std::vector<float>& gpu_k,
                      const std::vector<float>& cpu_k,
                      const std::vector<float>& gpu_v,
                      const std::vector<float>& cpu_v) {
  EXPECT_LE(h3::testing::NormalisedError(gpu_k, cpu_k), 1e-6);
  EXPECT_EQ(gpu_v, cpu_v);
}

struct PrefillCase {
  int heads, head_dim, rotary_dim;
  std::vector<int64_t> chunks;  // lengths of the successive calls
};

std::string PrefillName(const ::testing::TestParamInfo<PrefillCase>& info) {
  const PrefillCase& c = info.param;
  std::string name = std::to_string(c.heads) + "x" +
                     std::to_string(c.head_dim) + "_rot" +
                     std::to_string(c.rotary_dim);
  for (int64_t n : c.chunks) name += "_" + std::to_string(n);
  return name;
}

class AttentionPrefillGpuTest
    : public h3::testing::GpuTestWithParam<PrefillCase> {};

// The GPU fed the tokens chunk by chunk (start > 0 after the first) against
// the CPU twin fed them in one call: outputs and the whole cache, including
// the positions past the tokens, which must stay as they were.
TEST_P(AttentionPrefillGpuTest, ChunksMatchCpuInOneCall) {
  const PrefillCase& c = GetParam();
  const AttentionShape shape{c.heads, c.head_dim, c.rotary_dim};
  const int64_t d = shape.d_model();
  int64_t total = 0;
  for (int64_t n : c.chunks) total += n;
  const int64_t capacity = total + 5;
  const std::vector<float> qkv = h3::testing::RandomNormal(total * 3 * d, 1);
  const std::vector<float> inv_freq = InvFreq(c.rotary_dim);
  const float* freq = c.rotary_dim > 0 ? inv_freq.data() : nullptr;
  std::vector<float> cpu_k = h3::testing::RandomNormal(capacity * d, 2);
  std::vector<float> cpu_v = h3::testing::RandomNormal(capacity * d, 3);
  std::vector<float> gpu_k = cpu_k, gpu_v = cpu_v;

  DeviceBuffer d_qkv, d_freq, d_k, d_v, d_out;
  ASSERT_CUDA_OK(Upload(qkv, &d_qkv));
  ASSERT_CUDA_OK(Upload(inv_freq, &d_freq));
  ASSERT_CUDA_OK(Upload(cpu_k, &d_k));
  ASSERT_CUDA_OK(Upload(cpu_v, &d_v));
  ASSERT_CUDA_OK(d_out.Reserve(total * d * sizeof(float)));
  int64_t start = 0;
  for (int64_t n : c.chunks) {
    AttentionParams p{shape,
                      start,
                      n,
                      d_qkv.as<float>() + start * 3 * d,
                      c.rotary_dim > 0 ? d_freq.as<float>() : nullptr,
                      {d_k.as<float>(), d_v.as<float>(), capacity},
                      d_out.as<float>() + start * d};
    ASSERT_CUDA_OK(AttentionPrefillCuda(p, nullptr));
    start += n;
  }
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> gpu_out(total * d);
  ASSERT_CUDA_OK(Download(d_out, &gpu_out));
  ASSERT_CUDA_OK(Download(d_k, &gpu_k));
  ASSERT_CUDA_OK(Download(d_v, &gpu_v));

  std::vector<float> cpu_out(total * d), fp32_out(total * d);
  AttentionCpu({shape,
                0,
                total,
                qkv.data(),
                freq,
                {cpu_k.data(), cpu_v.data(), capacity},
                cpu_out.data()});
  for (int64_t t = 0; t < total; ++t) {
    Fp32Attention(shape, qkv.data() + t * 3 * d, t, freq, cpu_k.data(),
                  cpu_v.data(), fp32_out.data() + t * d);
  }
  ExpectOutputClose(gpu_out, cpu_out, fp32_out);
  ExpectCacheClose(gpu_k, cpu_k, gpu_v, cpu_v);
}

// Head dims 4 to 256 (one to eight dims per lane, and 6 and 100, which fill
// neither a float4 nor a warp), full, partial and no rotary; chunks that
// split the 16-query and 32-key tiles unevenly.
INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionPrefillGpuTest,
    ::testing::Values(
        PrefillCase{1, 4, 4, {1}}, PrefillCase{2, 8, 0, {97}},
        PrefillCase{4, 16, 8, {40, 1, 56}}, PrefillCase{2, 6, 2, {19, 18}},
        PrefillCase{3, 64, 64, {97}}, PrefillCase{2, 64, 32, {33, 64, 17}},
        PrefillCase{2, 100, 96, {129}}, PrefillCase{4, 128, 128, {1025}},
        PrefillCase{2, 128, 0, {300, 1, 700, 24}},
        PrefillCase{1, 256, 256, {70, 30}}),
    PrefillName);

struct DecodeCase {
  int heads, head_dim, rotary_dim;
  int64_t capacity;                // each cache's, and max_positions
  std::vector<int64_t> positions;  // one sequence each
};

std::string DecodeName(const ::testing::TestParamInfo<DecodeCase>& info) {
  const DecodeCase& c = info.param;
  std::string name =
      std::to_string(c.heads) + "x" + std::to_string(c.head_dim) + "_rot" +
      std::to_string(c.rotary_dim) + "_cap" + std::to_string(c.capacity);
  for (int64_t pos : c.positions) name += "_" + std::to_string(pos);
  return name;
}

// A decode batch on the host and the device: random earlier tokens in each
// sequence's cache (all of it, so that untouched positions can be checked).
struct DecodeBatch {
  AttentionShape shape;
  int64_t capacity = 0;
  int batch = 0;
  std::vector<float> qkv, inv_freq, k, v;  // k, v: [batch, capacity, d]
  std::vector<int64_t> positions;
  DeviceBuffer d_qkv, d_freq, d_k, d_v, d_caches, d_positions, d_out, d_work;

  cudaError_t Init(const DecodeCase& c, uint32_t seed) {
    shape = {c.heads, c.head_dim, c.rotary_dim};
    capacity = c.capacity;
    positions = c.positions;
    batch = static_cast<int>(positions.size());
    const int64_t d = shape.d_model();
    qkv = h3::testing::RandomNormal(batch * 3 * d, seed);
    inv_freq = InvFreq(c.rotary_dim);
    k = h3::testing::RandomNormal(batch * capacity * d, seed + 1);
    v = h3::testing::RandomNormal(batch * capacity * d, seed + 2);
    std::vector<KvCache> caches(batch);
    cudaError_t err = Upload(k, &d_k);
    if (err == cudaSuccess) err = Upload(v, &d_v);
    for (int b = 0; b < batch; ++b) {
      caches[b] = {d_k.as<float>() + b * capacity * d,
                   d_v.as<float>() + b * capacity * d, capacity};
    }
    if (err == cudaSuccess) err = Upload(caches, &d_caches);
    if (err == cudaSuccess) err = Upload(qkv, &d_qkv);
    if (err == cudaSuccess) err = Upload(inv_freq, &d_freq);
    if (err == cudaSuccess) err = Upload(positions, &d_positions);
    if (err == cudaSuccess) err = d_out.Reserve(batch * d * sizeof(float));
    // Exactly the bytes asked for: the kernels must fit in them.
    if (err == cudaSuccess) err = d_work.Reserve(WorkspaceBytes());
    return err;
  }

  size_t WorkspaceBytes() const {
    return AttentionDecodeWorkspaceBytes(shape, batch, capacity);
  }

  AttentionDecodeParams DeviceParams() const {
    return {shape,
            batch,
            d_qkv.as<float>(),
            shape.rotary_dim > 0 ? d_freq.as<float>() : nullptr,
            d_caches.as<KvCache>(),
            d_positions.as<int64_t>(),
            d_out.as<float>()};
  }

  cudaError_t Launch(cudaStream_t stream) {
    return AttentionDecodeCuda(DeviceParams(), capacity, d_work.get(),
                               WorkspaceBytes(), stream);
  }

  // Checks the device's outputs and caches against the CPU twin, which this
  // runs on the host copies (so they then hold the expected caches).
  void ExpectMatchesCpu() {
    const int64_t d = shape.d_model();
    std::vector<float> gpu_out(batch * d), gpu_k(k.size()), gpu_v(v.size());
    ASSERT_CUDA_OK(Download(d_out, &gpu_out));
    ASSERT_CUDA_OK(Download(d_k, &gpu_k));
    ASSERT_CUDA_OK(Download(d_v, &gpu_v));
    const float* freq = shape.rotary_dim > 0 ? inv_freq.data() : nullptr;
    std::vector<KvCache> caches(batch);
    for (int b = 0; b < batch; ++b) {
      caches[b] = {k.data() + b * capacity * d, v.data() + b * capacity * d,
                   capacity};
    }
    std::vector<float> cpu_out(batch * d), fp32_out(batch * d);
    AttentionDecodeCpu({shape, batch, qkv.data(), freq, caches.data(),
                        positions.data(), cpu_out.data()});
    for (int b = 0; b < batch; ++b) {
      Fp32Attention(shape, qkv.data() + b * 3 * d, positions[b], freq,
                    static_cast<const float*>(caches[b].k),
                    static_cast<const float*>(caches[b].v),
                    fp32_out.data() + b * d);
    }
    ExpectOutputClose(gpu_out, cpu_out, fp32_out);
    ExpectCacheClose(gpu_k, k, gpu_v, v);
  }
};

class AttentionDecodeGpuTest
    : public h3::testing::GpuTestWithParam<DecodeCase> {};

TEST_P(AttentionDecodeGpuTest, MatchesCpuTwin) {
  DecodeBatch batch;
  ASSERT_CUDA_OK(batch.Init(GetParam(), 11));
  ASSERT_CUDA_OK(batch.Launch(nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  batch.ExpectMatchesCpu();
}

// Positions 0 and capacity - 1; piece boundaries (pieces are 64 keys up to
// a capacity of 4096: 255, 256, 257 around the fourth boundary; at 4200
// they are 66 keys, at 20000 313, 64 pieces either way); contexts of 4096
// keys and more over 63 and 64 pieces.
INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionDecodeGpuTest,
    ::testing::Values(DecodeCase{1, 4, 4, 8, {0}},
                      DecodeCase{2, 8, 0, 64, {0, 5, 63, 17}},
                      DecodeCase{3, 6, 4, 40, {39, 0, 7}},
                      DecodeCase{4, 64, 64, 300, {299, 0, 256, 255, 257}},
                      DecodeCase{
                          8, 128, 128, 4200, {4095, 4199, 0, 1000, 4096}},
                      DecodeCase{2, 128, 64, 20000, {19999, 313, 312}},
                      DecodeCase{2, 256, 128, 512, {511, 100}}),
    DecodeName);

// One captured graph, replayed for new positions and tokens written into the
// same device arrays: the launch must not depend on the positions.
class AttentionDecodeGraphGpuTest : public h3::testing::GpuTest {};

TEST_F(AttentionDecodeGraphGpuTest, ServesNewPositions) {
  DecodeBatch batch;
  ASSERT_CUDA_OK(batch.Init({4, 64, 32, 1000, {10, 999, 0}}, 21));
  cudaStream_t stream = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  ASSERT_CUDA_OK(batch.Launch(stream));
  ASSERT_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
  batch.ExpectMatchesCpu();  // the host caches now hold step one's writes

  // Step two: each sequence one further on, or back to a short one.
  batch.positions = {11, 300, 1};
  batch.qkv = h3::testing::RandomNormal(batch.qkv.size(), 22);
  ASSERT_CUDA_OK(Upload(batch.positions, &batch.d_positions));
  ASSERT_CUDA_OK(Upload(batch.qkv, &batch.d_qkv));
  ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
  batch.ExpectMatchesCpu();

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// The checks come before any device work, so these run without a GPU; the
// pointers are never dereferenced.
TEST(AttentionCudaArgumentsTest, RejectsTooSmallWorkspace) {
  const AttentionShape shape{2, 8, 8};
  std::vector<float> host(64);
  float* fake = host.data();
  const std::vector<KvCache> caches(3, KvCache{fake, fake, 1000});
  const std::vector<int64_t> positions(3, 0);
  const AttentionDecodeParams p{
      shape, 3, fake, fake, caches.data(), positions.data(), fake};
  const size_t need = AttentionDecodeWorkspaceBytes(shape, 3, 1000);
  ASSERT_GT(need, 0u);
  EXPECT_EQ(AttentionDecodeCuda(p, 1000, fake, need - 1, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(AttentionDecodeCuda(p, 1000, nullptr, need, nullptr),
            cudaErrorInvalidValue);
  // A longer capacity needs more pieces, so more workspace.
  EXPECT_GT(AttentionDecodeWorkspaceBytes(shape, 3, 100000), need);
  EXPECT_EQ(AttentionDecodeCuda(p, 100000, fake, need, nullptr),
            cudaErrorInvalidValue);
}

TEST(AttentionCudaArgumentsTest, RejectsBadShapes) {
  std::vector<float> host(64);
  float* fake = host.data();
  const KvCache cache{fake, fake, 8};
  const int64_t position = 0;
  // Odd rotary, rotary wider than the head, rotary without frequencies,
  // a head wider than 256.
  const AttentionShape shapes[] = {
      {2, 8, 3}, {2, 8, 10}, {2, 8, 4}, {1, 260, 0}};
  const float* freqs[] = {fake, fake, nullptr, nullptr};
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const AttentionParams prefill{shapes[i], 0, 1, fake, freqs[i], cache, fake};
    EXPECT_EQ(AttentionPrefillCuda(prefill, nullptr), cudaErrorInvalidValue);
    const AttentionDecodeParams decode{shapes[i], 1,         fake, freqs[i],
                                       &cache,    &position, fake};
    EXPECT_EQ(AttentionDecodeCuda(decode, 8, fake, 1 << 20, nullptr),
              cudaErrorInvalidValue);
  }
  // Tokens past the cache's capacity.
  const AttentionParams past{{2, 8, 0}, 5, 4, fake, nullptr, cache, fake};
  EXPECT_EQ(AttentionPrefillCuda(past, nullptr), cudaErrorInvalidValue);
}

TEST(AttentionCudaArgumentsTest, EmptyCallsSucceedWithoutLaunching) {
  // Null pointers everywhere: nothing may be launched or read.
  const AttentionParams prefill{{2, 8, 0}, 0, 0, nullptr, nullptr, {}, nullptr};
  EXPECT_EQ(AttentionPrefillCuda(prefill, nullptr), cudaSuccess);
  const AttentionDecodeParams decode{{2, 8, 0}, 0,       nullptr, nullptr,
                                     nullptr,   nullptr, nullptr};
  EXPECT_EQ(AttentionDecodeWorkspaceBytes(decode.shape, 0, 64), 0u);
  EXPECT_EQ(AttentionDecodeCuda(decode, 64, nullptr, 0, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace h3::kernels
