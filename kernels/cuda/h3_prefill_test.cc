// GPU tests of H3PrefillCuda (both paths) and of the cuFFT path alone against
// the CPU twin H3PrefillCpu: random layers, inputs and states, every element
// type and layout, calls at positions from 0 to far past d_state (the shift
// state's ring read and written across its wrap), chunked calls (label gpu:
// skipped without a device).
#include "kernels/cuda/h3_prefill.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/h3_prefill_cufft.h"
#include "kernels/cuda/h3_prefill_test_support.h"
#include "kernels/h3.h"
#include "tests/support/gpu_test.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::RandomH3Layer;
using testing::BatchState;
using testing::DeviceTensor;
using testing::Inputs;
using testing::NormalisedError;
using testing::Stream;

// Error bounds: normalised errors max|got - want| / max|want| per tensor, the
// GPU against the CPU twin fed the same (rounded) inputs and states.
//
// cuFFT path, fp32. Both sides compute the same function in fp32 with powers
// of dA formed in double; they differ by (a) the FFT convolution, fp32 on both
// sides (cuFFT at nfft <= 16384, kissfft at up to 65536 here), each within
// about log2(nfft) * 2^-24 ~ 1e-6 of the exact convolution relative to the
// signal; (b) kbar, summed in fp32 on the GPU and in double on the CPU, a few
// ulps; (c) the carried state's output, an fp32 dot product of 32 modes on
// the GPU. 1e-5 leaves a few times the sum for the largest sizes.
constexpr double kCufftOutputBound = 1e-5;
// The shift state is a ring of raw inputs (fp32 copies of the rounded k) on
// both paths and both sides: equal, bit for bit.
// The diagonal state: 32-token partial sums in fp32 then double (GPU) against
// double throughout (CPU), from kv values a few ulps apart (from kbar).
constexpr double kCufftDiagStateBound = 1e-5;
// Fused path: FFTs as fp16 tensor-core matrix products with fp32
// accumulation (fp16 operands carry 2^-11 relative error, a few stages of
// them plus the output gate give a few 1e-3); states accumulated in fp32
// from fp16-rounded operands, so within a few 2^-11 = 4.9e-4 of the exact
// state. The first GPU run (H100, commit 2128013) measured 2.2e-4 to
// 3.6e-4 for the state on fused calls (token-major ones with d_model 1).
constexpr double kFusedOutputBound = 1e-2;
constexpr double kFusedStateBound = 1e-3;
// Outputs stored as fp16 / bf16 add their rounding: UnitRoundoff(type).

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

const char* TypeName(ElementType t) {
  return t == ElementType::kF32   ? "fp32"
         : t == ElementType::kF16 ? "fp16"
                                  : "bf16";
}

// Runs `op` over the inputs as consecutive calls of the lengths in `calls`
// (summing to the whole length), the first at position `start`, each
// continuing from the position and the state the last one left, with the
// tensors in a channel-major or token-major layout of the whole length.
// Returns the outputs [batch, length, d] and the end state.
// Op: H3PrefillCuda or H3PrefillCufft.
template <typename Op>
void RunGpu(Op& op, int d, ElementType type, bool channel_major, int batch,
            int64_t start, const std::vector<int64_t>& calls, const Inputs& in,
            std::vector<float>* out, BatchState* state) {
  int64_t length = 0;
  for (int64_t c : calls) length += c;
  const SequenceLayout layout = channel_major
                                    ? SequenceLayout::ChannelMajor(d, length)
                                    : SequenceLayout::TokenMajor(d, length);
  auto tensor = [&] { return DeviceTensor{batch, length, d, type, layout}; };
  DeviceTensor q = tensor(), k = tensor(), v = tensor(), o = tensor();
  ASSERT_CUDA_OK(testing::Upload(in.q, &q));
  ASSERT_CUDA_OK(testing::Upload(in.k, &k));
  ASSERT_CUDA_OK(testing::Upload(in.v, &v));
  ASSERT_CUDA_OK(o.memory.Reserve(o.bytes()));
  ASSERT_CUDA_OK(cudaMemset(o.memory.get(), 0xff, o.bytes()));  // NaNs
  DeviceBuffer shift, diag;
  ASSERT_CUDA_OK(testing::CopyToDevice(in.state.shift, &shift));
  ASSERT_CUDA_OK(testing::CopyToDevice(in.state.diag, &diag));
  Stream stream;
  ASSERT_CUDA_OK(stream.created);
  int64_t t0 = 0;
  for (int64_t len : calls) {
    H3PrefillCudaParams p;
    p.batch = batch;
    p.start = start + t0;
    p.length = len;
    p.type = type;
    p.layout = layout;
    p.q = q.At(t0);
    p.k = k.At(t0);
    p.v = v.At(t0);
    p.out = o.At(t0);
    p.shift_state = shift.as<float>();
    p.diag_state = diag.as<float>();
    ASSERT_CUDA_OK(op.Run(p, stream.stream)) << "call at token " << t0;
    t0 += len;
  }
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream.stream));
  ASSERT_CUDA_OK(testing::Download(o, out));
  *state = in.state;
  ASSERT_CUDA_OK(testing::CopyToHost(shift, &state->shift));
  ASSERT_CUDA_OK(testing::CopyToHost(diag, &state->diag));
}

// Expects the rings equal bit for bit; reports the first difference.
void ExpectSameRings(const std::vector<float>& got,
                     const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t differ = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      if (differ++ == 0) first = i;
    }
  }
  EXPECT_EQ(differ, 0u) << "shift state: first at [" << first << "] "
                        << (differ > 0 ? got[first] : 0.0f) << " vs "
                        << (differ > 0 ? want[first] : 0.0f);
}

// Checks the GPU's outputs and end state against the CPU twin's.
void ExpectClose(const std::vector<float>& got, const BatchState& got_state,
                 const std::vector<float>& want, const BatchState& want_state,
                 bool fused, ElementType type) {
  const double out_bound = (fused ? kFusedOutputBound : kCufftOutputBound) +
                           testing::UnitRoundoff(type);
  EXPECT_LE(NormalisedError(got, want), out_bound) << "outputs";
  ExpectSameRings(got_state.shift, want_state.shift);
  EXPECT_LE(NormalisedError(got_state.diag, want_state.diag),
            fused ? kFusedStateBound : kCufftDiagStateBound)
      << "diagonal state";
}

// Whether `op` runs a call in this layout (d channels) on the fused kernel:
// asked of the op, whose rule makes a token-major call with d = 1 fused too
// (the first GPU run judged those by the cuFFT bounds and failed them).
bool RunsFused(const H3PrefillCuda& op, bool channel_major, int d) {
  return op.RunsFused(channel_major ? SequenceLayout::ChannelMajor(d, 1)
                                    : SequenceLayout::TokenMajor(d, 1));
}

struct Case {
  H3PrefillPath prefer;
  H3Shape shape;
  int batch;
  int64_t length;
  bool channel_major;
  ElementType type;
  int64_t start;  // the position of the call's first token
};

std::string Describe(const Case& c) {
  return std::string(H3PrefillPathName(c.prefer)) + "_d" +
         std::to_string(c.shape.d_model) + "_p" +
         std::to_string(c.shape.head_dim) + "_N" +
         std::to_string(c.shape.d_state) + "_b" + std::to_string(c.batch) +
         "_L" + std::to_string(c.length) + "_at" + std::to_string(c.start) +
         (c.channel_major ? "_channel_" : "_token_") + TypeName(c.type);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return Describe(info.param);
}

void PrintTo(const Case& c, std::ostream* os) { *os << Describe(c); }

// Start positions: 0 (a new sequence's first chunk), below N = 64, 63 (so
// that 2 tokens already wrap the ring: slots 63 and 0), above N, and far
// past it at an offset that wraps the ring for most lengths.
constexpr int64_t kStarts[] = {0, 13, 63, 100, 70001};
constexpr int kNumStarts = 5;

std::vector<Case> Cases() {
  const ElementType types[] = {ElementType::kF32, ElementType::kF16,
                               ElementType::kBF16};
  const int64_t lengths[] = {1, 2, 63, 64, 97, 256, 1025, 2048, 8192, 32768};
  // d_model 1, 16 and 96 rotate over lengths and types so that each meets
  // each; the start positions rotate over all three and the layout. Batch 8,
  // and 2 at 32768 tokens: the CPU twin, the slow side, then takes about a
  // second for the largest case on two cores.
  const int dims[] = {96, 16, 1};
  std::vector<Case> cases;
  for (H3PrefillPath prefer :
       {H3PrefillPath::kCufft, H3PrefillPath::kFused, H3PrefillPath::kChunked,
        H3PrefillPath::kChunkedMma}) {
    for (int li = 0; li < 10; ++li) {
      for (bool channel_major : {true, false}) {
        for (int ti = 0; ti < 3; ++ti) {
          const int64_t len = lengths[li];
          const int si = (2 * li + (channel_major ? 1 : 0) + ti) % kNumStarts;
          cases.push_back({prefer,
                           {dims[(li + ti) % 3], 1, 64},
                           len <= 8192 ? 8 : 2,
                           len,
                           channel_major,
                           types[ti],
                           kStarts[si]});
        }
      }
    }
  }
  // Shapes only the cuFFT path handles: head_dim 8 (the pure-H3 models),
  // a head_dim that divides no tile evenly, more than 32 modes.
  // Each at two start positions.
  int si = 0;
  for (int64_t len : {1, 97, 1025, 8192, 10000}) {
    for (bool channel_major : {true, false}) {
      for (ElementType type : {ElementType::kF32, ElementType::kBF16}) {
        cases.push_back({H3PrefillPath::kCufft,
                         {32, 8, 16},
                         2,
                         len,
                         channel_major,
                         type,
                         kStarts[si++ % kNumStarts]});
      }
    }
  }
  for (bool channel_major : {true, false}) {
    for (int64_t len : {63, 1025}) {
      cases.push_back({H3PrefillPath::kCufft,
                       {12, 3, 10},
                       3,
                       len,
                       channel_major,
                       ElementType::kF32,
                       kStarts[si++ % kNumStarts]});
      cases.push_back({H3PrefillPath::kCufft,
                       {16, 1, 128},
                       3,
                       len,
                       channel_major,
                       ElementType::kF16,
                       kStarts[si++ % kNumStarts]});
    }
  }
  return cases;
}

class H3PrefillGpuTest : public h3::testing::GpuTestWithParam<Case> {};

TEST_P(H3PrefillGpuTest, MatchesCpuTwin) {
  const Case& c = GetParam();
  const RandomH3Layer layer(c.shape, 1);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {c.prefer}, &op));
  std::string why;
  // The chunked path takes the fused path's shapes.
  const bool fused_layer =
      c.prefer != H3PrefillPath::kCufft && H3FusedSupports(c.shape, &why);
  EXPECT_EQ(op->path(), fused_layer ? c.prefer : H3PrefillPath::kCufft)
      << op->reason();

  const Inputs in(c.shape, c.batch, c.length, c.type, 2);
  std::vector<float> want, got;
  BatchState want_state = in.state, got_state;
  testing::PrefillCpu(layer, c.batch, c.start, c.length, in.q, in.k, in.v,
                      &want, &want_state);
  ASSERT_NO_FATAL_FAILURE(RunGpu(*op, c.shape.d_model, c.type, c.channel_major,
                                 c.batch, c.start, {c.length}, in, &got,
                                 &got_state));
  ExpectClose(got, got_state, want, want_state,
              RunsFused(*op, c.channel_major, c.shape.d_model), c.type);
}

INSTANTIATE_TEST_SUITE_P(Cases, H3PrefillGpuTest, ::testing::ValuesIn(Cases()),
                         CaseName);

// (prefer, channel_major, head_dim)
using ChunkCase = std::tuple<H3PrefillPath, bool, int>;

class H3PrefillChunkedGpuTest
    : public h3::testing::GpuTestWithParam<ChunkCase> {};

// Calls of 1, 63, 1000 and 4096 tokens, twice over (10320 tokens, past one
// 8192-token piece), continue each other exactly as one call does: both
// against the CPU twin's single call. From position 0 and from a saved
// state at position 77.
TEST_P(H3PrefillChunkedGpuTest, ChunkedCallsEqualOneCall) {
  const auto [prefer, channel_major, head_dim] = GetParam();
  const H3Shape shape{16, head_dim, head_dim == 1 ? 64 : 16};
  const RandomH3Layer layer(shape, 3);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {prefer}, &op));
  const std::vector<int64_t> calls = {1, 63, 1000, 4096, 1, 63, 1000, 4096};
  int64_t length = 0;
  for (int64_t c : calls) length += c;
  const int batch = 4;  // the fourth starts from a zero state
  const Inputs in(shape, batch, length, ElementType::kF32, 20);
  for (int64_t start : {int64_t{0}, int64_t{77}}) {
    SCOPED_TRACE("start " + std::to_string(start));
    std::vector<float> want, chunked, whole;
    BatchState want_state = in.state, chunked_state, whole_state;
    testing::PrefillCpu(layer, batch, start, length, in.q, in.k, in.v, &want,
                        &want_state);
    ASSERT_NO_FATAL_FAILURE(RunGpu(*op, shape.d_model, ElementType::kF32,
                                   channel_major, batch, start, calls, in,
                                   &chunked, &chunked_state));
    ASSERT_NO_FATAL_FAILURE(RunGpu(*op, shape.d_model, ElementType::kF32,
                                   channel_major, batch, start, {length}, in,
                                   &whole, &whole_state));
    const bool fused = RunsFused(*op, channel_major, shape.d_model);
    ExpectClose(chunked, chunked_state, want, want_state, fused,
                ElementType::kF32);
    ExpectClose(whole, whole_state, want, want_state, fused, ElementType::kF32);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, H3PrefillChunkedGpuTest,
    ::testing::Values(ChunkCase{H3PrefillPath::kCufft, true, 1},
                      ChunkCase{H3PrefillPath::kCufft, false, 1},
                      ChunkCase{H3PrefillPath::kCufft, true, 8},
                      ChunkCase{H3PrefillPath::kCufft, false, 8},
                      ChunkCase{H3PrefillPath::kFused, true, 1},
                      ChunkCase{H3PrefillPath::kFused, false, 1},
                      ChunkCase{H3PrefillPath::kChunked, true, 1},
                      ChunkCase{H3PrefillPath::kChunked, false, 1},
                      ChunkCase{H3PrefillPath::kChunkedMma, true, 1},
                      ChunkCase{H3PrefillPath::kChunkedMma, false, 1}),
    [](const ::testing::TestParamInfo<ChunkCase>& info) {
      return std::string(H3PrefillPathName(std::get<0>(info.param))) +
             (std::get<1>(info.param) ? "_channel" : "_token") + "_p" +
             std::to_string(std::get<2>(info.param));
    });

class H3PrefillCufftGpuTest : public h3::testing::GpuTest {};

// A batch split into groups to bound the scratch (here one or two sequences
// at a time) computes what the whole batch at once does; over two pieces,
// from a saved state at position 70 (the second piece reads the ring the
// first one wrote).
TEST_F(H3PrefillCufftGpuTest, GroupsOfSequencesEqualTheWholeBatch) {
  const H3Shape shape{16, 1, 64};
  const RandomH3Layer layer(shape, 11);
  std::unique_ptr<H3PrefillCuda> weights;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {H3PrefillPath::kCufft},
                                       &weights));
  const int batch = 5;
  const int64_t start = 70, length = 8192 + 100;
  const Inputs in(shape, batch, length, ElementType::kF32, 40);
  std::vector<float> want;
  BatchState want_state = in.state;
  testing::PrefillCpu(layer, batch, start, length, in.q, in.k, in.v, &want,
                      &want_state);
  // 1 byte: one sequence per group. 6 MiB: a sequence's 8192-token piece
  // needs about 2 MiB (16 kv channels, nfft 16384), so groups of two, two and
  // one.
  for (int64_t budget : {int64_t{1}, int64_t{6} << 20}) {
    SCOPED_TRACE("scratch budget " + std::to_string(budget));
    std::unique_ptr<H3PrefillCufft> op;
    ASSERT_CUDA_OK(
        H3PrefillCufft::Create(weights->device_weights(), {budget}, &op));
    std::vector<float> got;
    BatchState got_state;
    ASSERT_NO_FATAL_FAILURE(RunGpu(*op, shape.d_model, ElementType::kF32,
                                   /*channel_major=*/false, batch, start,
                                   {length}, in, &got, &got_state));
    ExpectClose(got, got_state, want, want_state, /*fused=*/false,
                ElementType::kF32);
  }
}

}  // namespace
}  // namespace h3::kernels
