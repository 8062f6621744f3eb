// The chunked H3 prefill on packed rows: the CUDA source of
// h3_prefill_rows_kernel.cu (both shift convolutions, every element type),
// run on the CPU by the emulator (fibers.h), against the CPU twin
// H3PrefillCpu. The algorithm is checked by
// kernels/cpu/h3_chunked_emulation_test.cc; this checks the kernel's own
// code: the staging of q|k|v rows, the warps' shared memory, the WMMA
// operands and strides, the scan's lanes, the barriers, the end states.
// The kernels run through their launch functions (LaunchRows,
// LaunchChunkedPrefill), which run them on the emulator
// (h3_kernels_emulated). Compiled with kernels/cuda/emulator/device.h first
// (CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/emulator/fibers.h"
#include "kernels/cuda/flashconv_device.cuh"
#include "kernels/cuda/h3_prefill_chunked.h"
#include "kernels/cuda/h3_prefill_chunked_kernel.h"
#include "kernels/cuda/h3_prefill_rows_kernel.h"
#include "kernels/flashconv_setup.h"
#include "kernels/h3.h"
#include "kernels/h3_chunked.h"
#include "tests/support/flash_attention_cases.h"
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

using flashconv::ToFloat;

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
    // kTile rows of a sentinel past the call's rows: a store past a
    // segment's end lands there (from the last segment) or is overwritten
    // by the next segment's blocks, which the emulator runs later.
    out_.assign((rows_ + kTile) * d, flashconv::FromFloat<T>(0.0f));
    std::fill(out_.begin() + rows_ * d, out_.end(), Sentinel());
    ring_.resize(segments_.size() * d * n);
    diag_.resize(segments_.size() * d * n);
    for (float& x : ring_) x = normal(rng);
    for (float& x : diag_) x = 0.5f * normal(rng);
    setup_ = flashconv::ChannelSetups(w_);
    toeplitz_ = ChunkedChannels(w_);
  }

  // The kernels' segment table: each segment's first row (the rows
  // kernel's offset; the channel-major kernel's, time stride 1) and states.
  void FillSegments(flashconv::BlockSegment* seg) {
    const int d = w_.shape.d_model, n = w_.shape.d_state;
    int64_t row = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
      seg[i] = {segments_[i].start, segments_[i].length, row,
                ring_.data() + i * d * n, diag_.data() + i * d * n};
      row += segments_[i].length;
    }
  }

  // Runs the kernel under the emulator; "" or its error.
  template <bool kShiftMma>
  std::string Run(Order order) {
    const int d = w_.shape.d_model;
    RowsArgs a{
        w_,          setup_.data(),   toeplitz_.data(),    3 * d,       d,
        qkv_.data(), qkv_.data() + d, qkv_.data() + 2 * d, out_.data(), {}};
    FillSegments(a.seg);
    // The kernels' shared-memory opt-in, once a process, as the chunked
    // prefill's Create asks for it before any launch.
    static const cudaError_t set_up = [] {
      int max_shared = 0;
      return RowsKernelSetUp(&max_shared);
    }();
    if (set_up != cudaSuccess) return "RowsKernelSetUp failed";
    const emulator::ScopedOrder scoped(order);
    if (LaunchRows(ElementTypeOf<T>(), kShiftMma, a,
                   static_cast<unsigned>(segments_.size()),
                   nullptr) != cudaSuccess) {
      return emulator::LastRunError();
    }
    return "";
  }

  // The same segments through the channel-major chunked kernel (it ran on
  // an H200): q, k, v and out transposed to [d][R], the kernel's layout.
  std::string RunChannelMajor(Order order) {
    const int d = w_.shape.d_model;
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
    FillSegments(a.seg);
    const emulator::ScopedOrder scoped(order);
    const std::string error =
        LaunchChunkedPrefill(ElementTypeOf<T>(), false, a,
                             static_cast<unsigned>(segments_.size()),
                             nullptr) == cudaSuccess
            ? ""
            : emulator::LastRunError();
    for (int64_t r = 0; r < rows_; ++r) {
      for (int c = 0; c < d; ++c) out_[r * d + c] = o[c * rows_ + r];
    }
    return error;
  }

  // The same segments as the engine calls them: H3PrefillChunked (its
  // tables uploaded by Create into the emulator's device memory, TakesRows,
  // RunRows launching per kMaxPackedSegments segments). *took: TakesRows.
  std::string RunThroughHost(bool shift_mma, bool* took) {
    const int d = w_.shape.d_model, n = w_.shape.d_state;
    std::unique_ptr<H3PrefillChunked> op;
    if (H3PrefillChunked::Create(w_, w_, shift_mma, &op) != cudaSuccess) {
      return "H3PrefillChunked::Create failed";
    }
    std::vector<H3PrefillSegment> seqs;
    int64_t row = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
      seqs.push_back({segments_[i].start, segments_[i].length, row * 3 * d,
                      ring_.data() + i * d * n, diag_.data() + i * d * n});
      row += segments_[i].length;
    }
    H3PrefillPackedParams p =
        QkvRowsCall(ElementTypeOf<T>(), d, qkv_.data(), out_.data());
    p.segments = static_cast<int>(seqs.size());
    p.seqs = seqs.data();
    *took = op->TakesRows(p);
    return op->RunRows(p, nullptr) == cudaSuccess
               ? ""
               : emulator::LastRunError() + " (RunRows failed)";
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
    for (int64_t i = 0; i < rows_ * w_.shape.d_model; ++i) {
      o.push_back(ToFloat(out_[i]));
    }
    return o;
  }
  // Whether the rows past the call's are as filled (no store past the last
  // segment's end).
  bool TailUntouched() const {
    for (size_t i = rows_ * w_.shape.d_model; i < out_.size(); ++i) {
      if (ToFloat(out_[i]) != ToFloat(Sentinel())) return false;
    }
    return true;
  }
  const std::vector<float>& ring() const { return ring_; }
  const std::vector<float>& diag() const { return diag_; }

 private:
  static T Sentinel() { return flashconv::FromFloat<T>(-77.0f); }

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

// d_model 16: two blocks of 8 channels. Lengths across a partial column
// (17), a whole tile (256) and a second tile (300); starts at 0, past
// d_state (the ring's history) and far.
const std::vector<Segment> kSegments = {
    {0, 1}, {100, 17}, {70001, 256}, {63, 300}};

// The call's results (after a run) against the CPU twin's on the same
// inputs, with the GPU tests' bounds.
template <typename T>
void ExpectTheTwin(const RowsCall<T>& call, const std::vector<float>& want,
                   const std::vector<float>& want_ring,
                   const std::vector<float>& want_diag) {
  EXPECT_LE(NormalisedError(call.out(), want), kOutputBound) << "outputs";
  EXPECT_LE(NormalisedError(call.diag(), want_diag), kStateBound)
      << "diagonal state";
  EXPECT_EQ(call.ring(), want_ring) << "shift state";
  EXPECT_TRUE(call.TailUntouched()) << "a store past the last segment";
}

class RowsKernelEmulatedTest : public ::testing::TestWithParam<Case> {};

template <typename T, bool kShiftMma>
void Check(int d_state, Order order) {
  const RandomH3Layer layer({16, 1, d_state}, 31);
  RowsCall<T> call(layer, kSegments, 32);
  std::vector<float> want, want_ring, want_diag;
  call.Reference(&want, &want_ring, &want_diag);
  ASSERT_EQ(call.template Run<kShiftMma>(order), "");
  ExpectTheTwin(call, want, want_ring, want_diag);
}

// The unit roundoff of T's fp16-or-wider rounding: fp16's for fp32 and
// fp16 outputs (U and X_g are fp16 tensor-core operands), bf16's for bf16.
template <typename T>
double Roundoff() {
  return flash::UnitRoundoff(ElementTypeOf<T>());
}

// Two calls' results within out_bound (outputs) and diag_bound (diagonal
// states) of each other, both ways round (NormalisedError takes a
// non-finite value only in its first argument as a failure); rings bitwise.
template <typename T>
void ExpectAgree(const RowsCall<T>& a, const RowsCall<T>& b, double out_bound,
                 double diag_bound) {
  EXPECT_LE(std::max(NormalisedError(a.out(), b.out()),
                     NormalisedError(b.out(), a.out())),
            out_bound)
      << "outputs";
  EXPECT_LE(std::max(NormalisedError(a.diag(), b.diag()),
                     NormalisedError(b.diag(), a.diag())),
            diag_bound)
      << "diagonal state";
  EXPECT_EQ(a.ring(), b.ring()) << "shift state";
}

// As the GPU test's: the rows kernel computes what the channel-major
// kernel computes, the same arithmetic in the same order (here both on the
// emulator), so within one rounding of the stored output. The kShiftMma
// instances differ from the channel-major kernel's (fp16 taps there, two
// fp16 parts here): they are held to the fp32 shift convolution's results
// instead (below).
template <typename T>
void CheckAgainstChannelMajor(int d_state, Order order) {
  const RandomH3Layer layer({16, 1, d_state}, 33);
  RowsCall<T> rows(layer, kSegments, 34), channels(layer, kSegments, 34);
  ASSERT_EQ(rows.template Run<false>(order), "");
  ASSERT_EQ(channels.RunChannelMajor(order), "");
  const double roundoff = std::is_same_v<T, float> ? 0.0 : Roundoff<T>();
  ExpectAgree(rows, channels, 1e-6 + roundoff, 1e-6);
}

// The shift convolution on tensor cores (ShiftByRegisterMma) against the
// fp32 one in the same kernel: its kbar differs in the last bits (another
// order of summation, operands in two fp16 parts), which now and then moves
// an fp16 rounding of U = u / max |u| by one step. So the outputs agree
// within one such step (fp16's unit roundoff; bf16's for bf16 outputs),
// and so do the diagonal states, sums of R = E U (measured: outputs 8.7e-6
// to 2.4e-4, states 4e-7 to 2.3e-5); the rings bitwise. A token or tap
// out of place is O(1).
template <typename T>
void CheckShiftMmaAgainstFp32(int d_state, Order order) {
  const RandomH3Layer layer({16, 1, d_state}, 33);
  RowsCall<T> mma(layer, kSegments, 34), fp32(layer, kSegments, 34);
  ASSERT_EQ(mma.template Run<true>(order), "");
  ASSERT_EQ(fp32.template Run<false>(order), "");
  ExpectAgree(mma, fp32, Roundoff<T>(), Roundoff<__half>());
}

// check(T{}, std::bool_constant<shift_mma>{}, d_state, order) for the
// case's element type T and shift convolution.
template <typename Check>
void ForCase(const Case& c, Check check) {
  const auto [type, shift_mma, d_state, order] = c;
  io::DispatchIo(type, [&](auto element) {
    if (shift_mma) {
      check(element, std::true_type{}, d_state, order);
    } else {
      check(element, std::false_type{}, d_state, order);
    }
    return cudaSuccess;
  });
}

// shift_fp32 cases: against the channel-major kernel; shift_mma: against
// the fp32 shift convolution's instance.
TEST_P(RowsKernelEmulatedTest, AgreesWithItsReferenceKernel) {
  ForCase(GetParam(), [](auto element, auto mma, int d_state, Order order) {
    if constexpr (decltype(mma)::value) {
      CheckShiftMmaAgainstFp32<decltype(element)>(d_state, order);
    } else {
      CheckAgainstChannelMajor<decltype(element)>(d_state, order);
    }
  });
}

TEST_P(RowsKernelEmulatedTest, MatchesTheCpuTwin) {
  ForCase(GetParam(), [](auto element, auto mma, int d_state, Order order) {
    Check<decltype(element), decltype(mma)::value>(d_state, order);
  });
}

// 70 segments (two launches of at most 64) of 1 to 23 tokens at starts
// before and past d_state, through the host code the engine calls, against
// the CPU twin.
template <typename T, bool kShiftMma>
void CheckThroughHost() {
  const RandomH3Layer layer({16, 1, 64}, 35);
  std::vector<Segment> segments;
  for (int i = 0; i < 70; ++i)
    segments.push_back({i * 37 % 200, i * 7 % 23 + 1});
  RowsCall<T> call(layer, segments, 36);
  std::vector<float> want, want_ring, want_diag;
  call.Reference(&want, &want_ring, &want_diag);
  bool took = false;
  ASSERT_EQ(call.RunThroughHost(kShiftMma, &took), "");
  EXPECT_TRUE(took);
  ExpectTheTwin(call, want, want_ring, want_diag);
}

TEST(RowsHostEmulatedTest, SeventySegmentsThroughH3PrefillChunked) {
  CheckThroughHost<__half, false>();
  CheckThroughHost<__half, true>();
  CheckThroughHost<__nv_bfloat16, false>();
  CheckThroughHost<float, true>();
}

// TakesRows turns away what the rows kernel cannot take, and RunRows
// refuses it (nothing launched): a misaligned q, a segment not starting a
// row, d_model not a multiple of 8.
TEST(RowsHostEmulatedTest, RefusesCallsOffItsDomain) {
  for (const int d : {16, 12}) {
    const RandomH3Layer layer({d, 1, 64}, 37);
    std::unique_ptr<H3PrefillChunked> op;
    ASSERT_EQ(
        H3PrefillChunked::Create(layer.weights(), layer.weights(), false, &op),
        cudaSuccess);
    std::vector<uint16_t> qkv(8 * 3 * d + 8), out(8 * d + 8);
    float ring[16 * 64] = {}, diag[16 * 64] = {};
    H3PrefillSegment seg{0, 8, 0, ring, diag};
    H3PrefillPackedParams p =
        QkvRowsCall(ElementType::kF16, d, qkv.data(), out.data());
    p.segments = 1;
    p.seqs = &seg;
    EXPECT_EQ(op->TakesRows(p), d == 16) << "d " << d;
    if (d == 12) {
      EXPECT_EQ(op->RunRows(p, nullptr), cudaErrorInvalidValue);
      continue;
    }
    H3PrefillPackedParams bad = p;
    bad.q = qkv.data() + 1;
    EXPECT_FALSE(op->TakesRows(bad)) << "misaligned q";
    EXPECT_EQ(op->RunRows(bad, nullptr), cudaErrorInvalidValue);
    H3PrefillSegment mid = seg;
    mid.offset = d;  // inside a row of 3 d
    bad = p;
    bad.seqs = &mid;
    EXPECT_FALSE(op->TakesRows(bad)) << "a segment inside a row";
  }
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
