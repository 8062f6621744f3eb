#ifndef H3_TESTS_SUPPORT_PACKED_PREFILL_H_
#define H3_TESTS_SUPPORT_PACKED_PREFILL_H_

// Packed prefill calls (engine/backend.h: H3Layer::Prefill, Backend::
// Attention) against one call per segment, on any backend: three sequences
// each get a first chunk alone, then their second chunks either in one
// packed call or in one call each. The outputs and what the sequences keep
// (H3 states, K/V caches) must be the same bits. Header-only test support.

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/half_float.h"
#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/support/inv_freq.h"
#include "tests/support/random.h"

namespace h3::testing {

// The sequences' chunk lengths: firsts alone, seconds packed or alone. Some
// seconds are longer than the pieces the tests cut them into.
inline constexpr int64_t kFirstChunks[3] = {0, 5, 70};
inline constexpr int64_t kSecondChunks[3] = {150, 33, 1};

// Backend memory of `n` elements of `type`, holding `values` rounded to it.
inline engine::Buffer UploadAs(engine::Backend& backend,
                               const std::vector<float>& values,
                               ElementType type) {
  const int64_t n = static_cast<int64_t>(values.size());
  const int64_t floats = engine::FloatsHolding(n, type);
  std::vector<float> host(floats, 0.0f);
  StoreFloats(values.data(), n, host.data(), type, 0);
  absl::StatusOr<engine::Buffer> buffer = backend.Allocate(floats);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_TRUE(backend.CopyFromHost(host.data(), floats, buffer->data()).ok());
  return *std::move(buffer);
}

// The raw floats of a buffer (its bits, whatever its element type).
inline std::vector<float> Download(engine::Backend& backend,
                                   const engine::Buffer& buffer) {
  std::vector<float> host(buffer.size());
  EXPECT_TRUE(
      backend.CopyToHost(buffer.data(), buffer.size(), host.data()).ok());
  return host;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs the three sequences through `layer` (of `shape`) with pieces of
// `piece` tokens; `packed` says how the second chunks go. Returns the
// second chunks' outputs, then every state, as raw floats.
inline std::vector<std::vector<float>> RunH3Chunks(
    engine::Backend& backend, engine::H3Layer& layer,
    const kernels::H3Shape& shape, int64_t piece, bool packed) {
  const ElementType at = backend.activation_type();
  const int64_t d = shape.d_model, n = shape.d_state;
  const int64_t state_floats = d * n;  // shift [d, N]; diag [d, N/2] complex
  std::vector<engine::Buffer> states;
  std::vector<engine::H3Segment> seconds;
  int64_t rows = 0;
  for (int s = 0; s < 3; ++s) {
    states.push_back(
        UploadAs(backend, std::vector<float>(state_floats), ElementType::kF32));
    states.push_back(
        UploadAs(backend, std::vector<float>(state_floats), ElementType::kF32));
    const kernels::H3State state{states[2 * s].data(),
                                 states[2 * s + 1].data()};
    if (kFirstChunks[s] > 0) {
      const int64_t len = kFirstChunks[s];
      engine::Buffer qkv =
          UploadAs(backend, RandomNormal(len * 3 * d, 10 + s), at);
      engine::Buffer out = UploadAs(backend, std::vector<float>(len * d), at);
      EXPECT_TRUE(
          layer.Prefill({{0, len, state}}, piece, qkv.data(), out.data()).ok());
    }
    seconds.push_back({kFirstChunks[s], kSecondChunks[s], state});
    rows += kSecondChunks[s];
  }
  engine::Buffer qkv = UploadAs(backend, RandomNormal(rows * 3 * d, 20), at);
  engine::Buffer out = UploadAs(backend, std::vector<float>(rows * d), at);
  if (packed) {
    EXPECT_TRUE(layer.Prefill(seconds, piece, qkv.data(), out.data()).ok());
  } else {
    int64_t row = 0;
    for (const engine::H3Segment& s : seconds) {
      EXPECT_TRUE(layer
                      .Prefill({s}, piece,
                               ElementAt(qkv.data(), row * 3 * d, at),
                               ElementAt(out.data(), row * d, at))
                      .ok());
      row += s.length;
    }
  }
  std::vector<std::vector<float>> result = {Download(backend, out)};
  for (const engine::Buffer& b : states) result.push_back(Download(backend, b));
  return result;
}

// Packed against alone: the outputs (tensor 0), then what each sequence
// keeps (`kept`), the same bits.
inline ::testing::AssertionResult SameRuns(
    const std::vector<std::vector<float>>& packed,
    const std::vector<std::vector<float>>& alone, const char* kept) {
  for (size_t i = 0; i < packed.size(); ++i) {
    if (!SameBits(packed[i], alone[i])) {
      return ::testing::AssertionFailure() << (i == 0 ? "the outputs" : kept)
                                           << " differ (tensor " << i << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult H3PackedIsEachAlone(
    engine::Backend& backend, engine::H3Layer& layer,
    const kernels::H3Shape& shape, int64_t piece) {
  return SameRuns(RunH3Chunks(backend, layer, shape, piece, true),
                  RunH3Chunks(backend, layer, shape, piece, false), "a state");
}

// The same for an attention layer of `shape`: the outputs, then each
// sequence's K and V caches.
inline std::vector<std::vector<float>> RunAttentionChunks(
    engine::Backend& backend, const kernels::AttentionShape& shape,
    bool packed) {
  const ElementType at = backend.activation_type();
  const int64_t d = shape.d_model(), capacity = 256;
  engine::Buffer inv_freq =
      UploadAs(backend, InvFreq(shape.rotary_dim), ElementType::kF32);
  std::vector<engine::Buffer> caches;
  std::vector<engine::AttentionSegment> seconds;
  auto params = [&](absl::Span<const engine::AttentionSegment> segments,
                    const void* qkv, void* out) {
    engine::AttentionPrefillParams p;
    p.shape = shape;
    p.segments = segments;
    p.qkv = qkv;
    p.inv_freq = shape.rotary_dim > 0 ? inv_freq.data() : nullptr;
    p.out = out;
    p.io_type = at;
    return p;
  };
  int64_t rows = 0;
  for (int s = 0; s < 3; ++s) {
    caches.push_back(UploadAs(backend, std::vector<float>(capacity * d), at));
    caches.push_back(UploadAs(backend, std::vector<float>(capacity * d), at));
    const kernels::KvCache cache{caches[2 * s].data(), caches[2 * s + 1].data(),
                                 capacity, at};
    if (kFirstChunks[s] > 0) {
      const int64_t len = kFirstChunks[s];
      engine::Buffer qkv =
          UploadAs(backend, RandomNormal(len * 3 * d, 30 + s), at);
      engine::Buffer out = UploadAs(backend, std::vector<float>(len * d), at);
      const engine::AttentionSegment first{0, len, cache};
      EXPECT_TRUE(
          backend.Attention(params({&first, 1}, qkv.data(), out.data())).ok());
    }
    seconds.push_back({kFirstChunks[s], kSecondChunks[s], cache});
    rows += kSecondChunks[s];
  }
  engine::Buffer qkv = UploadAs(backend, RandomNormal(rows * 3 * d, 40), at);
  engine::Buffer out = UploadAs(backend, std::vector<float>(rows * d), at);
  if (packed) {
    EXPECT_TRUE(
        backend.Attention(params(seconds, qkv.data(), out.data())).ok());
  } else {
    int64_t row = 0;
    for (const engine::AttentionSegment& s : seconds) {
      EXPECT_TRUE(
          backend
              .Attention(params({&s, 1}, ElementAt(qkv.data(), row * 3 * d, at),
                                ElementAt(out.data(), row * d, at)))
              .ok());
      row += s.length;
    }
  }
  std::vector<std::vector<float>> result = {Download(backend, out)};
  for (const engine::Buffer& b : caches) result.push_back(Download(backend, b));
  return result;
}

inline ::testing::AssertionResult AttentionPackedIsEachAlone(
    engine::Backend& backend, const kernels::AttentionShape& shape) {
  return SameRuns(RunAttentionChunks(backend, shape, true),
                  RunAttentionChunks(backend, shape, false), "a cache");
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_PACKED_PREFILL_H_
