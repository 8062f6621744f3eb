// GPU tests of H3StepCuda against its CPU twin H3StepCpu: random layers and
// states, many consecutive steps, scattered (and some misaligned) states, both
// input strides, sequences at varied positions (new, inside the first ring
// turn, far past it, past 2^31, about to wrap the ring); a captured graph
// replayed over new states and positions; one ring slot written per channel
// and step; the argument checks (label gpu: skipped without a device, but for
// H3StepBytes).
#include "kernels/cuda/h3_step.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <ostream>
#include <random>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/h3_prefill_test_support.h"
#include "kernels/h3.h"
#include "tests/support/gpu_test.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::NormalisedError;
using h3::testing::RandomH3Layer;
using h3::testing::RandomNormal;
using testing::CopyToDevice;
using testing::CopyToHost;
using testing::Stream;

// Bound on the normalised error (max |gpu - cpu| / max |cpu|) of the outputs
// of all steps and of the diagonal states after them. Both sides run the
// same fp32 operations per element; they differ only in summation order
// (kbar's N taps and y's M modes: trees over different lanes; the CPU's are
// 16-float vectors, kernels/cpu/h3_recurrence.cc) and in fused multiply-adds, a
// few ulps (2^-24 ~ 6e-8) each. The diagonal state feeds its own past through
// |dA| < 1, which damps old errors instead of compounding them, so 32 steps
// stay near one step's error, ~1e-6 at N = 64. 1e-5 leaves a margin of ten. The
// shift ring holds raw inputs, no arithmetic: it must match bitwise.
constexpr double kBound = 1e-5;
// Steps per test: enough for errors to accumulate if they did, and for the
// small rings (N = 8, 10, 16) to wrap several times.
constexpr int kSteps = 32;

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// The layer's SSM parameters on the device; weights() points at them.
struct DeviceLayer {
  static constexpr int kArrays = 6;
  explicit DeviceLayer(const RandomH3Layer& layer) : shape(layer.shape) {
    const std::vector<float>* host[kArrays] = {
        &layer.shift_kernel, &layer.shift_D, &layer.dA,
        &layer.dB,           &layer.C,       &layer.D};
    for (int i = 0; i < kArrays; ++i) {
      status[i] = CopyToDevice(*host[i], &buf[i]);
    }
  }
  bool ok() const {
    return std::all_of(status, status + kArrays,
                       [](cudaError_t e) { return e == cudaSuccess; });
  }
  H3Weights weights() const {
    H3Weights w;
    w.shape = shape;
    w.shift_kernel = buf[0].as<float>();
    w.shift_D = buf[1].as<float>();
    w.dA = buf[2].as<float>();
    w.dB = buf[3].as<float>();
    w.C = buf[4].as<float>();
    w.D = buf[5].as<float>();
    return w;
  }
  H3Shape shape;
  DeviceBuffer buf[kArrays];
  cudaError_t status[kArrays];
};

// The position of each sequence's first step. The first ones cover the
// cases of the ring: a new sequence (0), the first turn (1, N / 2), the
// last slot before the first wrap (N - 1, N - 2), just past it (N + 1), a
// later turn about to wrap (5 N - 1), far on (1000003) and past 2^31 (the
// int64 positions), the list turned by `seed` so that small batches see
// different cases; the rest are random, small or large.
std::vector<int64_t> StartPositions(int sequences, int n_state, uint32_t seed) {
  const int64_t n = n_state;
  std::vector<int64_t> positions = {0,         1,     n / 2,
                                    n - 1,     n + 1, 5 * n - 1,
                                    1000003,   n - 2, (int64_t{3} << 31) + 5,
                                    2 * n - 3, 0,     n / 3};
  std::rotate(positions.begin(), positions.begin() + seed % positions.size(),
              positions.end());
  std::mt19937_64 rng(seed);
  while (static_cast<int>(positions.size()) < sequences) {
    const bool small = rng() % 2 == 0;
    positions.push_back(small
                            ? static_cast<int64_t>(rng() % (3 * n))
                            : static_cast<int64_t>(rng() % (int64_t{1} << 40)));
  }
  positions.resize(sequences);
  return positions;
}

// `sequences` states in one pool of floats, scattered: each sequence's shift
// and diagonal state sit in their own slots, the slots in a random order
// with gaps between them; every fifth sequence's states are one float off
// 16-byte alignment (the kernel's scalar path). The pool starts random,
// gaps included, so that a stray write shows; but each ring is well formed
// for its sequence's first position P: the slots of positions not yet
// reached (slots P..N-1 when P < N) are zero, and a new sequence's (P = 0)
// states are all zero.
struct ScatteredStates {
  ScatteredStates(const H3Shape& s, const std::vector<int64_t>& start,
                  uint32_t seed)
      : n_state(s.d_state),
        shift_size(static_cast<size_t>(s.d_model) * s.d_state),
        diag_size(2 * static_cast<size_t>(s.kv_channels()) * s.modes()) {
    const int sequences = static_cast<int>(start.size());
    const size_t slot = (std::max(shift_size, diag_size) + 8 + 3) / 4 * 4;
    std::vector<size_t> order(2 * sequences);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    for (int b = 0; b < sequences; ++b) {
      const size_t skew = b % 5 == 4 ? 1 : 0;
      shift_at.push_back(order[2 * b] * slot + 4 + skew);
      diag_at.push_back(order[2 * b + 1] * slot + 4 + skew);
    }
    pool = RandomNormal(2 * sequences * slot, seed + 1);
    for (int b = 0; b < sequences; ++b) {
      if (start[b] >= n_state) continue;
      for (size_t row = 0; row < shift_size; row += n_state) {
        std::fill(pool.begin() + shift_at[b] + row + start[b],
                  pool.begin() + shift_at[b] + row + n_state, 0.0f);
      }
      if (start[b] == 0) {
        std::fill_n(pool.begin() + diag_at[b], diag_size, 0.0f);
      }
    }
  }
  // The states of `ids`, pointing into the pool at `base`.
  std::vector<H3State> Views(float* base, const std::vector<int>& ids) const {
    std::vector<H3State> views;
    for (int b : ids) views.push_back({base + shift_at[b], base + diag_at[b]});
    return views;
  }
  int n_state;
  size_t shift_size, diag_size;
  std::vector<size_t> shift_at, diag_at;
  std::vector<float> pool;
};

// The positions of the sequences `ids` at their next step, from `next`
// (indexed by sequence), which then advances past it.
std::vector<int64_t> TakePositions(const std::vector<int>& ids,
                                   std::vector<int64_t>* next) {
  std::vector<int64_t> positions;
  for (int b : ids) positions.push_back((*next)[b]++);
  return positions;
}

// One step's q, k, v for `batch` sequences: three [batch, d] blocks
// (input_stride 0) or the column blocks of one [batch, 3 d] (input_stride
// 3 d), at `base` (host or device).
H3StepParams StepParams(const H3Weights& w, int batch, bool fused,
                        const float* base, float* out, const H3State* states,
                        const int64_t* positions) {
  const int64_t d = w.shape.d_model;
  const int64_t block = fused ? d : batch * d;
  H3StepParams p;
  p.w = w;
  p.batch = batch;
  p.q = base;
  p.k = base + block;
  p.v = base + 2 * block;
  p.out = out;
  p.states = states;
  p.input_stride = fused ? 3 * d : 0;
  p.positions = positions;
  return p;
}

// The floats at `at[i]`, `size` each, that differ bitwise between `got` and
// `want` (-0 against 0 counts as a difference).
size_t BitwiseDifferences(const std::vector<float>& got,
                          const std::vector<float>& want,
                          const std::vector<size_t>& at, size_t size) {
  size_t differ = 0;
  for (size_t start : at) {
    for (size_t i = start; i < start + size; ++i) {
      differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    }
  }
  return differ;
}

// Runs the same steps on the CPU twin and the GPU over the same scattered
// states, `rounds[i]` naming the sequences of step i (each sequence one
// position further at each of its steps, from StartPositions), and checks
// the outputs of all steps, the states after them and the gaps between
// them. `graph`: the GPU steps replay one captured graph, only the device
// states and positions arrays, inputs and outputs changing between replays.
void CheckSteps(const H3Shape& shape, int sequences,
                const std::vector<std::vector<int>>& rounds, bool fused,
                bool graph, uint32_t seed,
                H3StepKernel kernel = H3StepKernel::kAuto) {
  const RandomH3Layer layer(shape, seed);
  const DeviceLayer device_layer(layer);
  ASSERT_TRUE(device_layer.ok());
  std::vector<int64_t> next_position =
      StartPositions(sequences, shape.d_state, seed + 2);
  const ScatteredStates states(shape, next_position, seed + 1);
  std::vector<float> cpu_pool = states.pool;
  DeviceBuffer gpu_pool;
  ASSERT_CUDA_OK(CopyToDevice(states.pool, &gpu_pool));

  const int batch = static_cast<int>(rounds[0].size());
  const size_t inputs = 3 * static_cast<size_t>(batch) * shape.d_model;
  const size_t outputs = static_cast<size_t>(batch) * shape.d_model;
  DeviceBuffer gpu_in, gpu_out, gpu_views, gpu_positions;
  ASSERT_CUDA_OK(gpu_in.Reserve(inputs * sizeof(float)));
  ASSERT_CUDA_OK(gpu_out.Reserve(outputs * sizeof(float)));
  ASSERT_CUDA_OK(gpu_views.Reserve(batch * sizeof(H3State)));
  ASSERT_CUDA_OK(gpu_positions.Reserve(batch * sizeof(int64_t)));
  const H3StepParams gpu_params =
      StepParams(device_layer.weights(), batch, fused, gpu_in.as<float>(),
                 gpu_out.as<float>(), gpu_views.as<H3State>(),
                 gpu_positions.as<int64_t>());
  Stream stream;
  ASSERT_CUDA_OK(stream.created);
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t captured = nullptr;
    ASSERT_CUDA_OK(
        cudaStreamBeginCapture(stream.stream, cudaStreamCaptureModeGlobal));
    const cudaError_t launched =
        H3StepCuda(gpu_params, stream.stream, LaunchOrder::kAfterPrior, kernel);
    ASSERT_CUDA_OK(cudaStreamEndCapture(stream.stream, &captured));
    ASSERT_CUDA_OK(launched);
    ASSERT_CUDA_OK(cudaGraphInstantiate(&exec, captured, 0));
    ASSERT_CUDA_OK(cudaGraphDestroy(captured));
  }

  std::vector<float> cpu_out_all, gpu_out_all;
  std::vector<float> cpu_step(outputs), gpu_step(outputs);
  for (size_t i = 0; i < rounds.size(); ++i) {
    const std::vector<float> in = RandomNormal(inputs, seed + 10 + i);
    const std::vector<int64_t> positions =
        TakePositions(rounds[i], &next_position);
    std::vector<H3State> cpu_views = states.Views(cpu_pool.data(), rounds[i]);
    H3StepCpu(StepParams(layer.weights(), batch, fused, in.data(),
                         cpu_step.data(), cpu_views.data(), positions.data()));
    cpu_out_all.insert(cpu_out_all.end(), cpu_step.begin(), cpu_step.end());

    const std::vector<H3State> views =
        states.Views(gpu_pool.as<float>(), rounds[i]);
    ASSERT_CUDA_OK(cudaMemcpy(gpu_views.get(), views.data(),
                              batch * sizeof(H3State), cudaMemcpyDefault));
    ASSERT_CUDA_OK(cudaMemcpy(gpu_positions.get(), positions.data(),
                              batch * sizeof(int64_t), cudaMemcpyDefault));
    ASSERT_CUDA_OK(CopyToDevice(in, &gpu_in));
    ASSERT_CUDA_OK(graph ? cudaGraphLaunch(exec, stream.stream)
                         : H3StepCuda(gpu_params, stream.stream,
                                      LaunchOrder::kAfterPrior, kernel));
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream.stream));
    ASSERT_CUDA_OK(CopyToHost(gpu_out, &gpu_step));
    gpu_out_all.insert(gpu_out_all.end(), gpu_step.begin(), gpu_step.end());
  }
  if (exec != nullptr) {
    ASSERT_CUDA_OK(cudaGraphExecDestroy(exec));
  }

  std::vector<float> pool(cpu_pool.size());
  ASSERT_CUDA_OK(CopyToHost(gpu_pool, &pool));
  EXPECT_LE(NormalisedError(gpu_out_all, cpu_out_all), kBound) << "outputs";
  // The rings bitwise and the diagonal states within the bound, over all
  // sequences; the rest of the pool (gaps) unchanged from the start.
  EXPECT_EQ(
      BitwiseDifferences(pool, cpu_pool, states.shift_at, states.shift_size),
      0u)
      << "shift rings";
  std::vector<float> got, want;
  for (size_t start : states.diag_at) {
    got.insert(got.end(), pool.begin() + start,
               pool.begin() + start + states.diag_size);
    want.insert(want.end(), cpu_pool.begin() + start,
                cpu_pool.begin() + start + states.diag_size);
  }
  EXPECT_LE(NormalisedError(got, want), kBound) << "diagonal states";
  std::vector<bool> in_state(pool.size(), false);
  for (size_t start : states.shift_at) {
    std::fill_n(in_state.begin() + start, states.shift_size, true);
  }
  for (size_t start : states.diag_at) {
    std::fill_n(in_state.begin() + start, states.diag_size, true);
  }
  size_t stray = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    stray += !in_state[i] && pool[i] != states.pool[i];
  }
  EXPECT_EQ(stray, 0u) << "floats written outside the states";
}

// A few GPU steps of all `sequences` (input_stride 0), the rings copied back
// after each: in every channel of every sequence, slot pos mod N must hold
// that step's k bitwise and the other N - 1 slots must be bitwise what they
// were before the step.
void CheckOneSlotWritten(const H3Shape& shape, int sequences, int steps,
                         uint32_t seed, H3StepKernel kernel) {
  const RandomH3Layer layer(shape, seed);
  const DeviceLayer device_layer(layer);
  ASSERT_TRUE(device_layer.ok());
  std::vector<int64_t> next_position =
      StartPositions(sequences, shape.d_state, seed + 2);
  const ScatteredStates states(shape, next_position, seed + 1);
  DeviceBuffer gpu_pool;
  ASSERT_CUDA_OK(CopyToDevice(states.pool, &gpu_pool));
  std::vector<int> all(sequences);
  std::iota(all.begin(), all.end(), 0);
  const std::vector<H3State> views = states.Views(gpu_pool.as<float>(), all);

  const int d = shape.d_model, n_state = shape.d_state;
  const size_t inputs = 3 * static_cast<size_t>(sequences) * d;
  DeviceBuffer gpu_in, gpu_out, gpu_views, gpu_positions;
  ASSERT_CUDA_OK(gpu_out.Reserve(sequences * d * sizeof(float)));
  ASSERT_CUDA_OK(gpu_views.Reserve(sequences * sizeof(H3State)));
  ASSERT_CUDA_OK(gpu_positions.Reserve(sequences * sizeof(int64_t)));
  ASSERT_CUDA_OK(cudaMemcpy(gpu_views.get(), views.data(),
                            sequences * sizeof(H3State), cudaMemcpyDefault));

  std::vector<float> before = states.pool, after(states.pool.size());
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> in = RandomNormal(inputs, seed + 10 + step);
    const std::vector<int64_t> positions = TakePositions(all, &next_position);
    ASSERT_CUDA_OK(CopyToDevice(in, &gpu_in));
    ASSERT_CUDA_OK(cudaMemcpy(gpu_positions.get(), positions.data(),
                              sequences * sizeof(int64_t), cudaMemcpyDefault));
    ASSERT_CUDA_OK(H3StepCuda(
        StepParams(device_layer.weights(), sequences, /*fused=*/false,
                   gpu_in.as<float>(), gpu_out.as<float>(),
                   gpu_views.as<H3State>(), gpu_positions.as<int64_t>()),
        nullptr, LaunchOrder::kAfterPrior, kernel));
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    ASSERT_CUDA_OK(CopyToHost(gpu_pool, &after));

    std::vector<float> want = before;
    for (int b = 0; b < sequences; ++b) {
      const int newest = static_cast<int>(positions[b] % n_state);
      const float* k = in.data() + (static_cast<size_t>(sequences) + b) * d;
      for (int c = 0; c < d; ++c) {
        want[states.shift_at[b] + static_cast<size_t>(c) * n_state + newest] =
            k[c];
      }
    }
    EXPECT_EQ(
        BitwiseDifferences(after, want, states.shift_at, states.shift_size), 0u)
        << "step " << step;
    before = after;
  }
}

struct StepCase {
  int d, p, n, batch;
  bool fused;  // input_stride 3 d, else 0
  H3StepKernel kernel = H3StepKernel::kAuto;
};

std::ostream& operator<<(std::ostream& os, const StepCase& c) {
  return os << "d" << c.d << "_p" << c.p << "_N" << c.n << "_batch" << c.batch
            << (c.fused ? "_stride3d" : "_stride0")
            << (c.kernel == H3StepKernel::kRuntimeLanes ? "_runtime_lanes"
                                                        : "");
}

class H3StepCudaTest : public h3::testing::GpuTestWithParam<StepCase> {};

// kSteps steps of the whole batch, sequence b at state b (in its scattered
// slot), from random states well formed for each sequence's start position.
TEST_P(H3StepCudaTest, MatchesCpuOverManySteps) {
  const StepCase c = GetParam();
  std::vector<int> all(c.batch);
  std::iota(all.begin(), all.end(), 0);
  CheckSteps({c.d, c.p, c.n}, c.batch,
             std::vector<std::vector<int>>(kSteps, all), c.fused,
             /*graph=*/false, 100 * c.d + 10 * c.p + c.n, c.kernel);
}

// Three steps, the rings compared bitwise after each: one slot written per
// channel (a sequence starting at N - 1 or 5 N - 1 wraps to slot 0 on its
// second step).
TEST_P(H3StepCudaTest, WritesOneRingSlotPerChannel) {
  const StepCase c = GetParam();
  CheckOneSlotWritten({c.d, c.p, c.n}, c.batch, 3,
                      100 * c.d + 10 * c.p + c.n + 1, c.kernel);
}

// The first shapes run twice: on the float4 kernel (kAuto; for N 64 its
// instance with 16 lanes at compile time) and on the same kernel with its
// lanes at run time. d 2048 at batch 64 walks four sequences a block, all
// in flight at once; at batch 160, ten, reusing the walk's stages.
std::vector<StepCase> StepCases() {
  std::vector<StepCase> cases;
  // p = 1: N / 4 lanes a power of two, from 2 to 32 (N 256, past a warp:
  // the general kernel).
  for (const H3StepKernel kernel :
       {H3StepKernel::kAuto, H3StepKernel::kRuntimeLanes}) {
    for (StepCase c :
         {StepCase{8, 1, 8, 1, false}, StepCase{8, 1, 8, 64, true},
          StepCase{64, 1, 64, 17, false}, StepCase{2048, 1, 64, 1, true},
          StepCase{2048, 1, 64, 64, false}, StepCase{2048, 1, 64, 160, true},
          StepCase{1024, 1, 32, 40, true}, StepCase{64, 1, 128, 9, true},
          StepCase{40, 1, 256, 3, false}}) {
      c.kernel = kernel;
      cases.push_back(c);
    }
  }
  // p = 1, float4 path: N / 4 = 6 lanes padded to 8; float2 path (N = 10:
  // 5 lanes padded to 8); N = 160, past a warp per channel: general kernel.
  cases.push_back({96, 1, 24, 5, true});
  cases.push_back({40, 1, 10, 9, false});
  cases.push_back({48, 1, 160, 3, true});
  // p > 1: the general kernel.
  cases.push_back({64, 2, 16, 7, false});
  cases.push_back({512, 2, 64, 33, true});
  cases.push_back({128, 4, 32, 64, false});
  cases.push_back({2048, 4, 8, 3, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, H3StepCudaTest,
                         ::testing::ValuesIn(StepCases()),
                         [](const ::testing::TestParamInfo<StepCase>& info) {
                           std::ostringstream name;
                           name << info.param;
                           return name.str();
                         });

class H3StepCudaGraphTest : public h3::testing::GpuTest {};

// One graph captured for a batch of 4 serves different sequences at their
// own positions each replay (the device states and positions arrays
// rewritten in between), as the engine's decode graphs do; the float4
// kernel (lanes at compile and at run time) and the general kernel.
TEST_F(H3StepCudaGraphTest, ReplaysOverNewStates) {
  const std::vector<std::vector<int>> rounds = {
      {0, 1, 2, 3}, {4, 5, 6, 7}, {3, 0, 6, 5}, {7, 2, 1, 4}, {0, 1, 2, 3}};
  CheckSteps({256, 1, 64}, 8, rounds, /*fused=*/true, /*graph=*/true, 7);
  CheckSteps({256, 1, 64}, 8, rounds, /*fused=*/true, /*graph=*/true, 7,
             H3StepKernel::kRuntimeLanes);
  CheckSteps({96, 1, 24}, 8, rounds, /*fused=*/true, /*graph=*/true, 9);
  CheckSteps({256, 2, 16}, 8, rounds, /*fused=*/false, /*graph=*/true, 8);
}

class H3StepCudaArgsTest : public h3::testing::GpuTest {};

TEST_F(H3StepCudaArgsTest, BatchZeroLaunchesNothing) {
  const H3Shape shape{64, 1, 16};
  const RandomH3Layer layer(shape, 3);
  const DeviceLayer device_layer(layer);
  ASSERT_TRUE(device_layer.ok());
  H3StepParams p;  // null inputs, outputs and states: none may be touched
  p.w = device_layer.weights();
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(H3StepCudaArgsTest, InvalidShapesAreRejected) {
  const RandomH3Layer layer({64, 1, 16}, 4);
  const DeviceLayer device_layer(layer);
  ASSERT_TRUE(device_layer.ok());
  DeviceBuffer scratch;
  ASSERT_CUDA_OK(scratch.Reserve(1 << 16));
  float* any = scratch.as<float>();
  H3StepParams p;
  p.w = device_layer.weights();
  p.batch = 1;
  p.q = p.k = p.v = p.out = any;
  p.states = scratch.as<H3State>();
  p.positions = scratch.as<int64_t>();
  p.w.shape = {64, 1, 15};  // d_state odd
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorInvalidValue);
  p.w.shape = {64, 3, 16};  // d_model not a multiple of head_dim
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorInvalidValue);
  p.w.shape = {111, 111, 16};  // valid, but y [p, p] passes 48 KiB
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorNotSupported);
  p.w.shape = {64, 1, 16};
  p.states = nullptr;
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorInvalidValue);
  p.states = scratch.as<H3State>();
  p.positions = nullptr;
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorInvalidValue);
  p.positions = scratch.as<int64_t>();
  p.w.shift_kernel = nullptr;
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorInvalidValue);
  // Nothing was launched, so no error is pending.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The floor for d 2048, N 64, p 1, by hand: per sequence the shift ring
// read whole and written one slot a channel, (d N + d) * 4 = 532480 bytes,
// the diagonal state (d N / 2 complex) read and written,
// 2 * 131072 * 4 = 1048576, plus q, k, v, out, 4 * 2048 * 4 = 32768; once
// per call the parameters, shift_kernel, shift_D, dA, dB, C, D:
// (d N + d + 3 * d N + d) * 4 = 2113536. Needs no GPU.
TEST(H3StepBytesTest, CountsStatesOncePerSequenceAndParametersOnce) {
  const H3Shape shape{2048, 1, 64};
  EXPECT_EQ(H3StepBytes(shape, 1), 532480 + 1048576 + 32768 + 2113536);
  EXPECT_EQ(H3StepBytes(shape, 8), 8 * (532480 + 1048576 + 32768) + 2113536);
  EXPECT_EQ(H3StepBytes(shape, 0), 0);
  // p = 2, d 64, N 8: H 32, M 4, kv channels p^2 H = 128. State floats
  // moved: ring d N + d = 576, diagonal 2 * (2 * 128 * M) = 2048; rows
  // 4 d = 256; parameters d N + d + 3 * 2 H M + H = 1376:
  // 4 * (576 + 2048 + 256 + 1376) bytes.
  EXPECT_EQ(H3StepBytes({64, 2, 8}, 1), 17024);
}

}  // namespace
}  // namespace h3::kernels
