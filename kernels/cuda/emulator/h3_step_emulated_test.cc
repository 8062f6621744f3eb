// The GPU decode step, H3StepCuda's host code and kernels (the float4/float2
// head_dim-1 kernel, the general kernel), run on the CPU by the emulator
// (h3_step_emulated.cc) against the CPU twin H3StepCpu: several consecutive
// steps of a batch at varied positions, both input strides, every element
// type. The shapes pick each kernel the way the dispatch does on a GPU, the
// float4 kernel with its lanes at run time where a case names it
// (H3StepKernel::kRuntimeLanes); two take the 1.3B model's width and a
// batch of 64 or 100, where a block walks several sequences.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/element_type.h"
#include "gtest/gtest.h"
#include "kernels/cuda/emulator/fibers.h"
#include "kernels/cuda/h3_step.h"
#include "kernels/h3.h"
#include "tests/support/half_io.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::HalfInput;
using h3::testing::HalfValues;
using h3::testing::NormalisedError;
using h3::testing::RandomH3Layer;

// As kernels/cuda/h3_step_test.cc: the same fp32 operations in another
// summation order, a few ulps; the outputs are rounded once to the element
// type, where the two sides may land one unit of the type's last place
// apart.
constexpr double kBound = 1e-5;
constexpr int kSteps = 4;

double OutputBound(ElementType type) {
  switch (type) {
    case ElementType::kF16:
      return kBound + std::ldexp(1.0, -10);
    case ElementType::kBF16:
      return kBound + std::ldexp(1.0, -7);
    default:
      return kBound;
  }
}

// Each of `batch` sequences' own shift ring (d N floats) and diagonal
// state, drawn from `rng` a sequence at a time (ring, then diagonal).
struct RandomStates {
  RandomStates(const H3Shape& shape, int batch, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int b = 0; b < batch; ++b) {
      rings.emplace_back(size_t{1} * shape.d_model * shape.d_state);
      diags.emplace_back(2 * size_t{1} * shape.kv_channels() * shape.modes());
      for (float& x : rings.back()) x = normal(rng);
      for (float& x : diags.back()) x = 0.3f * normal(rng);
    }
  }
  std::vector<H3State> Views() {
    std::vector<H3State> views;
    for (size_t b = 0; b < rings.size(); ++b) {
      views.push_back({rings[b].data(), diags[b].data()});
    }
    return views;
  }
  std::vector<std::vector<float>> rings, diags;
};

// A step of `batch` sequences over q, k, v at `base` (elements of `element`
// bytes): [batch][3 d] rows (fused: input_stride 3 d) or three [batch][d]
// blocks.
H3StepParams StepParams(const H3Weights& w, int batch, bool fused,
                        const void* base, size_t element, void* out,
                        const H3State* states, const int64_t* positions) {
  const int64_t d = w.shape.d_model;
  const size_t block = size_t{1} * batch * d;
  const char* at = static_cast<const char*>(base);
  H3StepParams p;
  p.w = w;
  p.batch = batch;
  p.q = at;
  p.k = at + (fused ? d : block) * element;
  p.v = at + (fused ? 2 * d : 2 * block) * element;
  p.out = out;
  p.states = states;
  p.input_stride = fused ? 3 * d : 0;
  p.positions = positions;
  return p;
}

struct StepCase {
  int d, p, n, batch;
  bool fused;  // input_stride 3 d, else 0
  ElementType type;
  emulator::Order order = emulator::Order::kForward;  // the fibers'
  H3StepKernel kernel = H3StepKernel::kAuto;
};

std::ostream& operator<<(std::ostream& os, const StepCase& c) {
  return os << "d" << c.d << "_p" << c.p << "_N" << c.n << "_batch" << c.batch
            << (c.fused ? "_stride3d_" : "_stride0_") << ElementTypeName(c.type)
            << (c.order == emulator::Order::kForward ? "" : "_backward")
            << (c.kernel == H3StepKernel::kRuntimeLanes ? "_runtime_lanes"
                                                        : "");
}

class H3StepEmulatedTest : public ::testing::TestWithParam<StepCase> {};

TEST_P(H3StepEmulatedTest, MatchesTheCpuTwinOverSteps) {
  const StepCase c = GetParam();
  const emulator::ScopedOrder order(c.order);  // H3StepCuda's launches
  const H3Shape shape{c.d, c.p, c.n};
  const RandomH3Layer layer(shape, 41);
  const H3Weights w = layer.weights();
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  // Each sequence's own state, twice: the kernel's and the twin's.
  RandomStates kernel_side(shape, c.batch, rng);
  std::vector<std::vector<float>>& rings = kernel_side.rings;
  std::vector<std::vector<float>>& diags = kernel_side.diags;
  const size_t ring_size = size_t{1} * c.d * c.n;
  // New, inside the first ring turn, at its end, far past it, past 2^31.
  const int64_t starts[] = {
      0, 3, c.n - 1, c.n, 5 * c.n + 3, 70001, (int64_t{1} << 31) + 5};
  std::vector<int64_t> positions(c.batch);
  for (int b = 0; b < c.batch; ++b) {
    positions[b] = starts[b % 7] + b / 7;
    // A well-formed state for its first position P (as the GPU test's):
    // ring slots P .. N - 1 zero while P < N, the diagonal state zero at 0.
    if (positions[b] < c.n) {
      for (size_t row = 0; row < ring_size; row += c.n) {
        std::fill(rings[b].begin() + row + positions[b],
                  rings[b].begin() + row + c.n, 0.0f);
      }
    }
    if (positions[b] == 0) std::fill(diags[b].begin(), diags[b].end(), 0.0f);
  }
  RandomStates twin_side = kernel_side;
  std::vector<std::vector<float>>& cpu_rings = twin_side.rings;
  std::vector<std::vector<float>>& cpu_diags = twin_side.diags;
  const std::vector<H3State> states = kernel_side.Views();
  const std::vector<H3State> cpu_states = twin_side.Views();

  const size_t inputs = 3 * size_t{1} * c.batch * c.d;
  const size_t outputs = size_t{1} * c.batch * c.d;
  std::vector<float> got_all, want_all;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> in(inputs);
    for (float& x : in) x = normal(rng);
    std::vector<uint16_t> in_bits;
    if (c.type != ElementType::kF32) {
      const HalfInput half(in, c.type);
      in = half.values;
      in_bits = half.bits;
    }
    auto params = [&](const void* base, size_t element, void* out,
                      const H3State* views, const H3Weights& weights) {
      return StepParams(weights, c.batch, c.fused, base, element, out, views,
                        positions.data());
    };
    std::vector<float> want(outputs), got(outputs);
    H3StepCpu(
        params(in.data(), sizeof(float), want.data(), cpu_states.data(), w));
    std::vector<uint16_t> out_bits(outputs);
    H3StepParams p =
        c.type == ElementType::kF32
            ? params(in.data(), sizeof(float), got.data(), states.data(), w)
            : params(in_bits.data(), sizeof(uint16_t), out_bits.data(),
                     states.data(), w);
    p.io_type = c.type;
    ASSERT_EQ(H3StepCuda(p, nullptr, LaunchOrder::kAfterPrior, c.kernel),
              cudaSuccess)
        << emulator::LastRunError();
    if (c.type != ElementType::kF32) got = HalfValues(out_bits, c.type);
    got_all.insert(got_all.end(), got.begin(), got.end());
    want_all.insert(want_all.end(), want.begin(), want.end());
    for (int64_t& pos : positions) ++pos;
  }
  EXPECT_LE(NormalisedError(got_all, want_all), OutputBound(c.type))
      << "outputs";
  std::vector<float> got_diag, want_diag;
  for (int b = 0; b < c.batch; ++b) {
    EXPECT_EQ(rings[b], cpu_rings[b]) << "shift ring of sequence " << b;
    got_diag.insert(got_diag.end(), diags[b].begin(), diags[b].end());
    want_diag.insert(want_diag.end(), cpu_diags[b].begin(), cpu_diags[b].end());
  }
  EXPECT_LE(NormalisedError(got_diag, want_diag), kBound) << "diagonal states";
}

// One way to run H3StepCuda: its kernel and sequences a block (0: the
// rule).
struct StepRun {
  H3StepKernel kernel = H3StepKernel::kAuto;
  int sequences_per_block = 0;
};

// Every run of `runs`, each on its own copy of the same drawn states of
// `batch` sequences from `positions`, over kSteps steps of io `type`, gives
// the first run's outputs and leaves its states, bit for bit.
void ExpectTheFirstRunsBits(const H3Shape& shape, int batch, uint32_t seed,
                            ElementType type, std::vector<int64_t> positions,
                            const std::vector<StepRun>& runs) {
  const RandomH3Layer layer(shape, seed);
  std::mt19937 rng(seed + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const RandomStates drawn(shape, batch, rng);
  std::vector<RandomStates> sides(runs.size(), drawn);
  const bool f32 = type == ElementType::kF32;
  const size_t block = size_t{1} * batch * shape.d_model;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> in(3 * block);
    for (float& x : in) x = normal(rng);
    const HalfInput half(in, f32 ? ElementType::kF16 : type);
    std::vector<std::vector<float>> out(runs.size());
    std::vector<std::vector<uint16_t>> out_bits(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {
      out[i].resize(f32 ? block : 0);
      out_bits[i].resize(f32 ? 0 : block);
      const std::vector<H3State> states = sides[i].Views();
      H3StepParams p =
          f32 ? StepParams(layer.weights(), batch, false, in.data(),
                           sizeof(float), out[i].data(), states.data(),
                           positions.data())
              : StepParams(layer.weights(), batch, false, half.bits.data(),
                           sizeof(uint16_t), out_bits[i].data(), states.data(),
                           positions.data());
      p.io_type = type;
      ASSERT_EQ(H3StepCuda(p, nullptr, LaunchOrder::kAfterPrior, runs[i].kernel,
                           runs[i].sequences_per_block),
                cudaSuccess)
          << emulator::LastRunError();
      EXPECT_EQ(out[i], out[0]) << "run " << i << ", step " << step;
      EXPECT_EQ(out_bits[i], out_bits[0]) << "run " << i << ", step " << step;
    }
    for (int64_t& pos : positions) ++pos;
  }
  for (size_t i = 1; i < runs.size(); ++i) {
    for (int b = 0; b < batch; ++b) {
      EXPECT_EQ(sides[i].rings[b], sides[0].rings[b])
          << "run " << i << ": shift ring of sequence " << b;
      EXPECT_EQ(sides[i].diags[b], sides[0].diags[b])
          << "run " << i << ": diagonal state of sequence " << b;
    }
  }
}

// kAuto's instance for N 64 (its 16 lanes at compile time, ExactShiftStep)
// against the same kernel with its lanes at run time (kRuntimeLanes): the
// same slots in the same order, so the same bits, over kSteps steps from
// positions inside the ring's first turn, at its end and past it, in both
// fiber orders and element types.
class H3StepExactLanesTest
    : public ::testing::TestWithParam<std::tuple<ElementType, bool>> {};

TEST_P(H3StepExactLanesTest, GivesTheRuntimeLanesBits) {
  const auto [type, backward] = GetParam();
  const emulator::ScopedOrder order(backward ? emulator::Order::kBackward
                                             : emulator::Order::kForward);
  ExpectTheFirstRunsBits(
      {40, 1, 64}, 9, 43, type, {0, 1, 3, 5, 60, 62, 63, 64, 70001},
      {{H3StepKernel::kAuto}, {H3StepKernel::kRuntimeLanes}});
}

INSTANTIATE_TEST_SUITE_P(
    Types, H3StepExactLanesTest,
    ::testing::Combine(::testing::Values(ElementType::kF32, ElementType::kF16,
                                         ElementType::kBF16),
                       ::testing::Bool()));

// Sequences a block (H3StepCuda's sequences_per_block) change which block
// walks a sequence, never its sums: 1, 5, 16 and 20 a block (past the 16
// staged in shared memory, the rest from the arrays) give the rule's bits
// over kSteps steps of 37 sequences.
TEST(H3StepSequencesPerBlockTest, GiveTheRulesBits) {
  const int batch = 37;
  std::vector<int64_t> positions(batch);
  for (int b = 0; b < batch; ++b) positions[b] = 3 * b;
  std::vector<StepRun> runs;
  for (const int count : {0, 1, 5, 16, 20}) {  // 0: the rule
    runs.push_back({H3StepKernel::kAuto, count});
  }
  ExpectTheFirstRunsBits({40, 1, 64}, batch, 47, ElementType::kF16, positions,
                         runs);
}

std::vector<StepCase> Cases() {
  std::vector<StepCase> cases;
  for (const ElementType type :
       {ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
    for (const bool fused : {false, true}) {
      for (const emulator::Order order :
           {emulator::Order::kForward, emulator::Order::kBackward}) {
        // N / 4 lanes a channel (16, 4 and 2): the float4 kernel (kAuto;
        // its compile-time lanes at N 64) and the same with its lanes at
        // run time.
        for (const H3StepKernel kernel :
             {H3StepKernel::kRuntimeLanes, H3StepKernel::kAuto}) {
          cases.push_back({24, 1, 64, 9, fused, type, order, kernel});
          cases.push_back({24, 1, 16, 9, fused, type, order, kernel});
          cases.push_back({24, 1, 8, 9, fused, type, order, kernel});
        }
        // The float4 and float2 kernels (N not a multiple of 8).
        cases.push_back({20, 1, 4, 9, fused, type, order});
        cases.push_back({20, 1, 12, 9, fused, type, order});
        cases.push_back({20, 1, 10, 9, fused, type, order});
        // The general kernel (head_dim > 1).
        cases.push_back({16, 2, 8, 9, fused, type, order});
      }
    }
  }
  // The 1.3B model's width at batch 64: the grid walks four sequences a
  // block (SequenceGrid), all of their slices in flight at once (kStages);
  // at batch 100 six a block, the last block four, so the walk's stages
  // are reused.
  cases.push_back({2048, 1, 64, 100, true, ElementType::kF16,
                   emulator::Order::kForward, H3StepKernel::kRuntimeLanes});
  cases.push_back({2048, 1, 64, 64, true, ElementType::kF16});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, H3StepEmulatedTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<StepCase>& i) {
                           std::ostringstream os;
                           os << i.param;
                           return os.str();
                         });

}  // namespace
}  // namespace h3::kernels
