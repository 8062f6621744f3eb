// GPU tests of H3StepCuda against its CPU twin H3StepCpu: random layers and
// states, many consecutive steps, scattered (and some misaligned) states, both
// input strides; a captured graph replayed over new states; the argument
// checks (label gpu: skipped without a device, but for H3StepBytes).
#include "kernels/cuda/h3_step.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
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
// of all steps and of both states after them. Both sides run the same fp32
// operations per element; they differ only in summation order (kbar's N
// terms and y's M modes: a tree over lanes against a running sum) and in
// fused multiply-adds, a few ulps (2^-24 ~ 6e-8) each. The shift state takes
// no feedback (s = shifted s + B k), so its error stays at a few ulps. The
// diagonal state feeds its own past through |dA| < 1, which damps old
// errors instead of compounding them, so 32 steps stay near one step's
// error, ~1e-6 at N = 64. 1e-5 leaves a margin of ten.
constexpr double kBound = 1e-5;
// Steps per test: enough for errors to accumulate if they did.
constexpr int kSteps = 32;

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// The layer's SSM parameters on the device; weights() points at them.
struct DeviceLayer {
  explicit DeviceLayer(const RandomH3Layer& layer) : shape(layer.shape) {
    const std::vector<float>* host[] = {
        &layer.shift_B, &layer.shift_C, &layer.shift_D, &layer.dA,
        &layer.dB,      &layer.C,       &layer.D};
    for (int i = 0; i < 7; ++i) status[i] = CopyToDevice(*host[i], &buf[i]);
  }
  bool ok() const {
    return std::all_of(status, status + 7,
                       [](cudaError_t e) { return e == cudaSuccess; });
  }
  H3Weights weights() const {
    H3Weights w;
    w.shape = shape;
    w.shift_B = buf[0].as<float>();
    w.shift_C = buf[1].as<float>();
    w.shift_D = buf[2].as<float>();
    w.dA = buf[3].as<float>();
    w.dB = buf[4].as<float>();
    w.C = buf[5].as<float>();
    w.D = buf[6].as<float>();
    return w;
  }
  H3Shape shape;
  DeviceBuffer buf[7];
  cudaError_t status[7];
};

// `sequences` states in one pool of floats, scattered: each sequence's shift
// and diagonal state sit in their own slots, the slots in a random order
// with gaps between them; every fifth sequence's states are one float off
// 16-byte alignment (the kernel's scalar path). The pool starts random,
// gaps included, so that a stray write shows.
struct ScatteredStates {
  ScatteredStates(const H3Shape& s, int sequences, uint32_t seed)
      : shift_size(static_cast<size_t>(s.d_model) * s.d_state),
        diag_size(2 * static_cast<size_t>(s.kv_channels()) * s.modes()) {
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
  }
  // The states of `ids`, pointing into the pool at `base`.
  std::vector<H3State> Views(float* base, const std::vector<int>& ids) const {
    std::vector<H3State> views;
    for (int b : ids) views.push_back({base + shift_at[b], base + diag_at[b]});
    return views;
  }
  size_t shift_size, diag_size;
  std::vector<size_t> shift_at, diag_at;
  std::vector<float> pool;
};

// One step's q, k, v for `batch` sequences: three [batch, d] blocks
// (input_stride 0) or the column blocks of one [batch, 3 d] (input_stride
// 3 d), at `base` (host or device).
H3StepParams StepParams(const H3Weights& w, int batch, bool fused,
                        const float* base, float* out, const H3State* states) {
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
  return p;
}

// Runs the same steps on the CPU twin and the GPU over the same scattered
// states, `rounds[i]` naming the sequences of step i, and checks the
// outputs of all steps, the states after them and the gaps between them.
// `graph`: the GPU steps replay one captured graph, only the device states
// array, inputs and outputs changing between replays.
void CheckSteps(const H3Shape& shape, int sequences,
                const std::vector<std::vector<int>>& rounds, bool fused,
                bool graph, uint32_t seed) {
  const RandomH3Layer layer(shape, seed);
  const DeviceLayer device_layer(layer);
  ASSERT_TRUE(device_layer.ok());
  ScatteredStates states(shape, sequences, seed + 1);
  std::vector<float> cpu_pool = states.pool;
  DeviceBuffer gpu_pool;
  ASSERT_CUDA_OK(CopyToDevice(states.pool, &gpu_pool));

  const int batch = static_cast<int>(rounds[0].size());
  const size_t inputs = 3 * static_cast<size_t>(batch) * shape.d_model;
  const size_t outputs = static_cast<size_t>(batch) * shape.d_model;
  DeviceBuffer gpu_in, gpu_out, gpu_views;
  ASSERT_CUDA_OK(gpu_in.Reserve(inputs * sizeof(float)));
  ASSERT_CUDA_OK(gpu_out.Reserve(outputs * sizeof(float)));
  ASSERT_CUDA_OK(gpu_views.Reserve(batch * sizeof(H3State)));
  const H3StepParams gpu_params =
      StepParams(device_layer.weights(), batch, fused, gpu_in.as<float>(),
                 gpu_out.as<float>(), gpu_views.as<H3State>());
  Stream stream;
  ASSERT_CUDA_OK(stream.created);
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t captured = nullptr;
    ASSERT_CUDA_OK(
        cudaStreamBeginCapture(stream.stream, cudaStreamCaptureModeGlobal));
    const cudaError_t launched = H3StepCuda(gpu_params, stream.stream);
    ASSERT_CUDA_OK(cudaStreamEndCapture(stream.stream, &captured));
    ASSERT_CUDA_OK(launched);
    ASSERT_CUDA_OK(cudaGraphInstantiate(&exec, captured, 0));
    ASSERT_CUDA_OK(cudaGraphDestroy(captured));
  }

  std::vector<float> cpu_out_all, gpu_out_all;
  std::vector<float> cpu_step(outputs), gpu_step(outputs);
  for (size_t i = 0; i < rounds.size(); ++i) {
    const std::vector<float> in = RandomNormal(inputs, seed + 10 + i);
    std::vector<H3State> cpu_views = states.Views(cpu_pool.data(), rounds[i]);
    H3StepCpu(StepParams(layer.weights(), batch, fused, in.data(),
                         cpu_step.data(), cpu_views.data()));
    cpu_out_all.insert(cpu_out_all.end(), cpu_step.begin(), cpu_step.end());

    const std::vector<H3State> views =
        states.Views(gpu_pool.as<float>(), rounds[i]);
    ASSERT_CUDA_OK(cudaMemcpy(gpu_views.get(), views.data(),
                              batch * sizeof(H3State), cudaMemcpyDefault));
    ASSERT_CUDA_OK(CopyToDevice(in, &gpu_in));
    ASSERT_CUDA_OK(graph ? cudaGraphLaunch(exec, stream.stream)
                         : H3StepCuda(gpu_params, stream.stream));
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
  // Each state kind compared over all sequences; the rest of the pool (gaps
  // and unused sequences' states) unchanged from the start.
  std::vector<bool> in_state(pool.size(), false);
  auto compare = [&](const std::vector<size_t>& at, size_t size,
                     const char* what) {
    std::vector<float> got, want;
    for (size_t start : at) {
      got.insert(got.end(), pool.begin() + start, pool.begin() + start + size);
      want.insert(want.end(), cpu_pool.begin() + start,
                  cpu_pool.begin() + start + size);
      std::fill_n(in_state.begin() + start, size, true);
    }
    EXPECT_LE(NormalisedError(got, want), kBound) << what;
  };
  compare(states.shift_at, states.shift_size, "shift state");
  compare(states.diag_at, states.diag_size, "diagonal state");
  size_t stray = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    stray += !in_state[i] && pool[i] != states.pool[i];
  }
  EXPECT_EQ(stray, 0u) << "floats written outside the states";
}

struct StepCase {
  int d, p, n, batch;
  bool fused;  // input_stride 3 d, else 0
};

std::ostream& operator<<(std::ostream& os, const StepCase& c) {
  return os << "d" << c.d << "_p" << c.p << "_N" << c.n << "_batch" << c.batch
            << (c.fused ? "_stride3d" : "_stride0");
}

class H3StepCudaTest : public h3::testing::GpuTestWithParam<StepCase> {};

// kSteps steps of the whole batch, sequence b at state b (in its scattered
// slot), from random states.
TEST_P(H3StepCudaTest, MatchesCpuOverManySteps) {
  const StepCase c = GetParam();
  std::vector<int> all(c.batch);
  std::iota(all.begin(), all.end(), 0);
  CheckSteps({c.d, c.p, c.n}, c.batch,
             std::vector<std::vector<int>>(kSteps, all), c.fused,
             /*graph=*/false, 100 * c.d + 10 * c.p + c.n);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, H3StepCudaTest,
    ::testing::Values(
        // p = 1, float4 path: N / 4 lanes per channel, from 2 to 16.
        StepCase{8, 1, 8, 1, false}, StepCase{8, 1, 8, 64, true},
        StepCase{64, 1, 64, 17, false}, StepCase{2048, 1, 64, 1, true},
        StepCase{2048, 1, 64, 64, false}, StepCase{1024, 1, 32, 40, true},
        // p = 1: N / 4 = 6 lanes padded to 8; float2 path (N = 10: 5 lanes
        // padded to 8); N = 160, past a warp per channel: general kernel.
        StepCase{96, 1, 24, 5, true}, StepCase{40, 1, 10, 9, false},
        StepCase{48, 1, 160, 3, true},
        // p > 1: the general kernel.
        StepCase{64, 2, 16, 7, false}, StepCase{512, 2, 64, 33, true},
        StepCase{128, 4, 32, 64, false}, StepCase{2048, 4, 8, 3, true}),
    [](const ::testing::TestParamInfo<StepCase>& info) {
      std::ostringstream name;
      name << info.param;
      return name.str();
    });

class H3StepCudaGraphTest : public h3::testing::GpuTest {};

// One graph captured for a batch of 4 serves different sequences each
// replay (the device states array rewritten in between), as the engine's
// decode graphs do; both kernels.
TEST_F(H3StepCudaGraphTest, ReplaysOverNewStates) {
  const std::vector<std::vector<int>> rounds = {
      {0, 1, 2, 3}, {4, 5, 6, 7}, {3, 0, 6, 5}, {7, 2, 1, 4}, {0, 1, 2, 3}};
  CheckSteps({256, 1, 64}, 8, rounds, /*fused=*/true, /*graph=*/true, 7);
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
  p.w.shape = {64, 1, 15};  // d_state odd
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorInvalidValue);
  p.w.shape = {64, 3, 16};  // d_model not a multiple of head_dim
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorInvalidValue);
  p.w.shape = {111, 111, 16};  // valid, but y [p, p] passes 48 KiB
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorNotSupported);
  p.w.shape = {64, 1, 16};
  p.states = nullptr;
  EXPECT_EQ(H3StepCuda(p, nullptr), cudaErrorInvalidValue);
  // Nothing was launched, so no error is pending.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The floor for d 2048, N 64, p 1, by hand: per sequence the states
// (2 d N floats: shift d N, diagonal d N / 2 complex) read and written,
// 2 * 2 * 131072 * 4 = 2097152 bytes, plus q, k, v, out, 4 * 2048 * 4 =
// 32768; once per call the parameters, (2 d N + d + 3 * d N + d) * 4 =
// 2637824. Needs no GPU.
TEST(H3StepBytesTest, CountsStatesOncePerSequenceAndParametersOnce) {
  const H3Shape shape{2048, 1, 64};
  EXPECT_EQ(H3StepBytes(shape, 1), 2097152 + 32768 + 2637824);
  EXPECT_EQ(H3StepBytes(shape, 8), 8 * (2097152 + 32768) + 2637824);
  EXPECT_EQ(H3StepBytes(shape, 0), 0);
  // p = 2, d 64, N 8: H 32, M 4, kv channels p^2 H = 128. State floats
  // d N + 2 * 128 * M = 1536, rows 4 d = 256, parameters
  // 2 d N + d + 3 * 2 H M + H = 1888: 4 * (2 * 1536 + 256 + 1888) bytes.
  EXPECT_EQ(H3StepBytes({64, 2, 8}, 1), 20864);
}

}  // namespace
}  // namespace h3::kernels
