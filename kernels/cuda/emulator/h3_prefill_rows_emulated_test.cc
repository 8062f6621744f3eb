// The chunked H3 prefill on packed rows: the CUDA source of
// h3_prefill_rows_kernel.cu (both shift convolutions, every element type),
// run on the CPU by the emulator (fibers.h), against the CPU twin
// H3PrefillCpu. The algorithm is checked by
// kernels/cpu/h3_chunked_emulation_test.cc; this checks the kernel's own
// code: the staging of q|k|v rows, the warps' shared memory, the WMMA
// operands and strides, the scan's lanes, the barriers, the end states.
// Compiled with kernels/cuda/emulator/device.h first (CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/emulator/h3_prefill_chunked_emulated.h"
#include "kernels/cuda/h3_prefill_rows_kernel.cu"
#include "kernels/flashconv_setup.h"
#include "kernels/h3.h"
#include "kernels/h3_chunked.h"
#include "tests/support/h3_cpu_prefill.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels::chunked {
namespace {

using emulator::Order;
using h3::testing::NormalisedError;
using h3::testing::RandomH3Layer;

// The fused and chunked kernels' bounds against the CPU twin
// (kernels/cuda/h3_prefill_test.cc): fp16 tensor-core operands cost a few
// 1e-3 of the output's scale, the states accumulate in fp32.
constexpr double kOutputBound = 1e-2;
constexpr double kStateBound = 1e-3;

template <typename T>
float ToFloat(T v) {
  return flashconv::ToFloat(v);
}

template <typename T>
constexpr ElementType ElementTypeOf() {
  if constexpr (std::is_same_v<T, float>) {
    return ElementType::kF32;
  } else if constexpr (std::is_same_v<T, __half>) {
    return ElementType::kF16;
  } else {
    return ElementType::kBF16;
  }
}

// One packed call: segments of q|k|v rows [R][3 d] of T, out [R][d].
struct Segment {
  int64_t start, length;
};

template <typename T>
class RowsCall {
 public:
  RowsCall(const RandomH3Layer& layer, const std::vector<Segment>& segments,
           uint32_t seed)
      : w_(layer.weights()), segments_(segments) {
    const int d = w_.shape.d_model, n = w_.shape.d_state;
    for (const Segment& s : segments_) rows_ += s.length;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    qkv_.resize(rows_ * 3 * d);
    for (T& x : qkv_) x = flashconv::FromFloat<T>(normal(rng));
    out_.assign(rows_ * d, flashconv::FromFloat<T>(0.0f));
    ring_.resize(segments_.size() * d * n);
    diag_.resize(segments_.size() * d * n);
    for (float& x : ring_) x = normal(rng);
    for (float& x : diag_) x = 0.5f * normal(rng);
    setup_ = flashconv::ChannelSetups(w_);
    toeplitz_ = ChunkedChannels(w_);
  }

  // Runs the kernel under the emulator; "" or its error.
  template <bool kShiftMma>
  std::string Run(Order order) {
    const int d = w_.shape.d_model, n = w_.shape.d_state;
    RowsArgs a{
        w_,          setup_.data(),   toeplitz_.data(),    3 * d,       d,
        qkv_.data(), qkv_.data() + d, qkv_.data() + 2 * d, out_.data(), {}};
    int64_t row = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
      a.seg[i] = {segments_[i].start, segments_[i].length, row,
                  ring_.data() + i * d * n, diag_.data() + i * d * n};
      row += segments_[i].length;
    }
    const dim3 grid(d / kRowChannels, static_cast<unsigned>(segments_.size()));
    return emulator::Run(
        grid, dim3(kRowThreads), SharedBytes<T, kShiftMma>(),
        [&a] { RowsKernel<T, kShiftMma>(a); }, order);
  }

  // The same segments through the channel-major chunked kernel (it ran on
  // an H200): q, k, v and out transposed to [d][R], the kernel's layout.
  std::string RunChannelMajor(bool shift_mma, Order order) {
    const int d = w_.shape.d_model, n = w_.shape.d_state;
    std::vector<T> q(rows_ * d), k(rows_ * d), v(rows_ * d), o(rows_ * d);
    for (int64_t r = 0; r < rows_; ++r) {
      for (int c = 0; c < d; ++c) {
        q[c * rows_ + r] = qkv_[r * 3 * d + c];
        k[c * rows_ + r] = qkv_[r * 3 * d + d + c];
        v[c * rows_ + r] = qkv_[r * 3 * d + 2 * d + c];
      }
    }
    ChunkedArgs a{w_,       setup_.data(), toeplitz_.data(), rows_, q.data(),
                  k.data(), v.data(),      o.data(),         {}};
    int64_t row = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
      a.seg[i] = {segments_[i].start, segments_[i].length, row,
                  ring_.data() + i * d * n, diag_.data() + i * d * n};
      row += segments_[i].length;
    }
    const emulator::ScopedOrder scoped(order);
    const std::string error = RunChunkedPrefillEmulated(
        ElementTypeOf<T>(), shift_mma, a, static_cast<int>(segments_.size()));
    for (int64_t r = 0; r < rows_; ++r) {
      for (int c = 0; c < d; ++c) out_[r * d + c] = o[c * rows_ + r];
    }
    return error;
  }

  // The CPU twin on the same inputs (widened exactly) and states (those
  // before Run: call first).
  void Reference(std::vector<float>* out, std::vector<float>* ring,
                 std::vector<float>* diag) const {
    const int d = w_.shape.d_model, n = w_.shape.d_state;
    out->clear();
    *ring = ring_;
    *diag = diag_;
    int64_t row = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
      const int64_t len = segments_[i].length;
      std::vector<float> q(len * d), k(len * d), v(len * d), o;
      for (int64_t t = 0; t < len; ++t) {
        for (int c = 0; c < d; ++c) {
          const T* r = qkv_.data() + (row + t) * 3 * d;
          q[t * d + c] = ToFloat(r[c]);
          k[t * d + c] = ToFloat(r[d + c]);
          v[t * d + c] = ToFloat(r[2 * d + c]);
        }
      }
      std::vector<float> seg_ring(ring->begin() + i * d * n,
                                  ring->begin() + (i + 1) * d * n);
      std::vector<float> seg_diag(diag->begin() + i * d * n,
                                  diag->begin() + (i + 1) * d * n);
      h3::testing::PrefillCpu(w_, segments_[i].start, len, q, k, v, &o,
                              &seg_ring, &seg_diag);
      out->insert(out->end(), o.begin(), o.end());
      std::copy(seg_ring.begin(), seg_ring.end(), ring->begin() + i * d * n);
      std::copy(seg_diag.begin(), seg_diag.end(), diag->begin() + i * d * n);
      row += len;
    }
  }

  std::vector<float> out() const {
    std::vector<float> o;
    for (const T& x : out_) o.push_back(ToFloat(x));
    return o;
  }
  const std::vector<float>& ring() const { return ring_; }
  const std::vector<float>& diag() const { return diag_; }

 private:
  H3Weights w_;
  std::vector<Segment> segments_;
  int64_t rows_ = 0;
  std::vector<T> qkv_, out_;
  std::vector<float> ring_, diag_;
  std::vector<flashconv::ChannelSetup> setup_;
  std::vector<ChunkedChannel> toeplitz_;
};

// (element type, shift on tensor cores, d_state, fiber order)
using Case = std::tuple<ElementType, bool, int, Order>;

class RowsKernelEmulatedTest : public ::testing::TestWithParam<Case> {};

template <typename T, bool kShiftMma>
void Check(int d_state, Order order) {
  // d_model 16: two blocks of 8 channels. Lengths across a partial column
  // (17), a whole tile (256) and a second tile (300); starts at 0, past
  // d_state (the ring's history) and far.
  const RandomH3Layer layer({16, 1, d_state}, 31);
  const std::vector<Segment> segments = {
      {0, 1}, {100, 17}, {70001, 256}, {63, 300}};
  RowsCall<T> call(layer, segments, 32);
  std::vector<float> want, want_ring, want_diag;
  call.Reference(&want, &want_ring, &want_diag);
  ASSERT_EQ(call.template Run<kShiftMma>(order), "");
  const std::vector<float> got = call.out();
  EXPECT_LE(NormalisedError(got, want), kOutputBound) << "outputs";
  EXPECT_LE(NormalisedError(call.diag(), want_diag), kStateBound)
      << "diagonal state";
  EXPECT_EQ(call.ring(), want_ring) << "shift state";
}

// As the GPU test's: the rows kernel computes what the channel-major
// kernel computes, the same arithmetic in the same order (here both on the
// emulator), so within one rounding of the stored output.
template <typename T, bool kShiftMma>
void CheckAgainstChannelMajor(int d_state, Order order) {
  const RandomH3Layer layer({16, 1, d_state}, 33);
  const std::vector<Segment> segments = {
      {0, 1}, {100, 17}, {70001, 256}, {63, 300}};
  RowsCall<T> rows(layer, segments, 34), channels(layer, segments, 34);
  ASSERT_EQ(rows.template Run<kShiftMma>(order), "");
  ASSERT_EQ(channels.RunChannelMajor(kShiftMma, order), "");
  const double roundoff = std::is_same_v<T, float>    ? 0.0
                          : std::is_same_v<T, __half> ? std::ldexp(1.0, -11)
                                                      : std::ldexp(1.0, -8);
  // Both ways round: NormalisedError takes a non-finite value only in its
  // first argument as a failure.
  EXPECT_LE(std::max(NormalisedError(rows.out(), channels.out()),
                     NormalisedError(channels.out(), rows.out())),
            1e-6 + roundoff)
      << "outputs";
  EXPECT_LE(std::max(NormalisedError(rows.diag(), channels.diag()),
                     NormalisedError(channels.diag(), rows.diag())),
            1e-6)
      << "diagonal state";
  EXPECT_EQ(rows.ring(), channels.ring()) << "shift state";
}

TEST_P(RowsKernelEmulatedTest, ComputesWhatTheChannelMajorKernelComputes) {
  const auto [type, shift_mma, d_state, order] = GetParam();
  io::DispatchIo(type, [&](auto element) {
    using T = decltype(element);
    if (shift_mma) {
      CheckAgainstChannelMajor<T, true>(d_state, order);
    } else {
      CheckAgainstChannelMajor<T, false>(d_state, order);
    }
    return cudaSuccess;
  });
}

TEST_P(RowsKernelEmulatedTest, MatchesTheCpuTwin) {
  const auto [type, shift_mma, d_state, order] = GetParam();
  io::DispatchIo(type, [&](auto element) {
    using T = decltype(element);
    if (shift_mma) {
      Check<T, true>(d_state, order);
    } else {
      Check<T, false>(d_state, order);
    }
    return cudaSuccess;
  });
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RowsKernelEmulatedTest,
    ::testing::Combine(::testing::Values(ElementType::kF32, ElementType::kF16,
                                         ElementType::kBF16),
                       ::testing::Bool(), ::testing::Values(64, 32),
                       ::testing::Values(Order::kForward, Order::kBackward)),
    [](const ::testing::TestParamInfo<Case>& i) {
      return std::string(ElementTypeName(std::get<0>(i.param))) +
             (std::get<1>(i.param) ? "_shift_mma" : "_shift_fp32") + "_N" +
             std::to_string(std::get<2>(i.param)) +
             (std::get<3>(i.param) == Order::kForward ? "_forward"
                                                      : "_backward");
    });

}  // namespace
}  // namespace h3::kernels::chunked
