// h3_step_bench: the GPU decode step (H3StepCuda, kernels/cuda/h3_step.h)
// of one H3 layer at the H3-1.3B shape (d_model 2048, d_state 64, head_dim
// 1) by each head_dim-1 kernel H3StepKernel names (auto: the float4 kernel,
// its lanes known at compile time for N 64; runtime_lanes: the same kernel
// with its lanes at run time), at several batch sizes, against the bytes
// it must move (H3StepBytes) and the device-to-device copy bandwidth measured
// in the same run. With --sequences-per-block 8,16 also "auto_spb8" ...:
// the auto kernel with that many sequences a block (H3StepCuda's
// sequences_per_block; "sequences_per_block" in every record, 0 for the
// rule). JSON on stdout, or in --out.
//
//   h3_step_bench [--types fp16] [--batches 1,8,64] [--d 2048] [--n 64]
//       [--sequences-per-block 8,16]
//       [--reps 100] [--rounds 5] [--rotate-mib 512] [--copy-mib 1024]
//       [--device 0] [--out FILE]
//
// Method: per (type, batch, kernel), enough copies of a layer (its SSM
// parameters, `batch` sequences' states at positions past the ring's
// length, q, k, v and out) to pass --rotate-mib, so that each call reads
// them from HBM and not from L2, as a decode step's 22 H3 layers do; a
// random layer's parameters (tests/support/random_h3_layer.h: |dA| < 1, so
// the states stay finite), states and inputs N(0, 1); 3 untimed calls,
// then --rounds rounds of --reps calls cycling through the copies, each
// round between two CUDA events. ms: the per-call mean of the fastest round
// (and of the median one); gb_per_s = H3StepBytes / ms; fraction_of_copy
// against the measured copy bandwidth. Correctness is the tests' part
// (kernels/cuda/h3_step_test.cc runs both kernels against the CPU twin).
//
// Exit status: 0; 1 on a CUDA failure (the call and the error are printed)
// or an unwritable --out; 2 without a CUDA device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/flashconv_cases.h"
#include "bench/flashconv_device.h"
#include "bench/flashconv_floor.h"
#include "bench/flashconv_report.h"
#include "bench/gpu_bench_support.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/h3_step.h"
#include "kernels/h3.h"
#include "nlohmann/json.hpp"
#include "tests/support/random_h3_layer.h"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;
using kernels::H3Shape;
using kernels::H3State;
using kernels::H3StepParams;

struct Flags : TimingFlags {
  Flags() {
    reps = 100;
    rounds = 5;
  }
  std::vector<std::string> types = {"fp16"};
  std::vector<int> batches = {1, 8, 64};
  int d = 2048;
  int n = 64;
  std::vector<int> sequences_per_block;  // also auto at each of these
};

// One layer's copy: parameters, states, inputs and outputs on the device.
struct Copy {
  kernels::DeviceBuffer weights, pool, io, states, positions;
  H3StepParams params;
};

// The SSM parameters of a random layer (|dA| < 1) as MakeCopy lays them
// out, one block: shift_kernel [d, N], shift_D [d], dA, dB, C [d, N / 2,
// 2], D [d].
std::vector<float> HostWeights(const H3Shape& s) {
  const testing::RandomH3Layer layer(s, 7);
  std::vector<float> w;
  for (const std::vector<float>* v :
       {&layer.shift_kernel, &layer.shift_D, &layer.dA, &layer.dB, &layer.C,
        &layer.D}) {
    w.insert(w.end(), v->begin(), v->end());
  }
  return w;
}

void MakeCopy(const H3Shape& s, ElementType type, int batch,
              const std::vector<float>& host_weights, uint64_t seed,
              cudaStream_t stream, Copy* c) {
  const int64_t d = s.d_model, n = s.d_state;
  H3_BENCH_CUDA_CHECK(c->weights.Reserve(host_weights.size() * sizeof(float)));
  H3_BENCH_CUDA_CHECK(cudaMemcpy(c->weights.get(), host_weights.data(),
                                 host_weights.size() * sizeof(float),
                                 cudaMemcpyHostToDevice));
  const int64_t per_sequence = d * n + d * n;  // ring, then diagonal state
  H3_BENCH_CUDA_CHECK(c->pool.Reserve(batch * per_sequence * sizeof(float)));
  H3_BENCH_CUDA_CHECK(FillNormal(c->pool.get(), batch * per_sequence,
                                 ElementType::kF32, seed, stream));
  const int64_t io_elements = 4 * batch * d;  // q, k, v, out
  H3_BENCH_CUDA_CHECK(c->io.Reserve(io_elements * ElementSize(type)));
  H3_BENCH_CUDA_CHECK(
      FillNormal(c->io.get(), io_elements, type, seed + 1, stream));
  std::vector<H3State> states(batch);
  std::vector<int64_t> positions(batch);
  float* pool = c->pool.as<float>();
  for (int b = 0; b < batch; ++b) {
    states[b] = {pool + b * per_sequence, pool + b * per_sequence + d * n};
    positions[b] = 1000 + 37 * b;  // every tap reaches an input
  }
  H3_BENCH_CUDA_CHECK(c->states.Reserve(batch * sizeof(H3State)));
  H3_BENCH_CUDA_CHECK(c->positions.Reserve(batch * sizeof(int64_t)));
  H3_BENCH_CUDA_CHECK(cudaMemcpy(c->states.get(), states.data(),
                                 batch * sizeof(H3State),
                                 cudaMemcpyHostToDevice));
  H3_BENCH_CUDA_CHECK(cudaMemcpy(c->positions.get(), positions.data(),
                                 batch * sizeof(int64_t),
                                 cudaMemcpyHostToDevice));
  const float* w = c->weights.as<float>();
  H3StepParams& p = c->params;
  p.w.shape = s;
  p.w.shift_kernel = w;
  p.w.shift_D = w + d * n;
  p.w.dA = w + d * n + d;
  p.w.dB = p.w.dA + d * n;
  p.w.C = p.w.dB + d * n;
  p.w.D = p.w.C + d * n;
  const char* io = static_cast<const char*>(c->io.get());
  const int64_t block = batch * d * ElementSize(type);
  p.q = io;
  p.k = io + block;
  p.v = io + 2 * block;
  p.out = static_cast<char*>(c->io.get()) + 3 * block;
  p.io_type = type;
  p.batch = batch;
  p.states = c->states.as<H3State>();
  p.positions = c->positions.as<int64_t>();
}

// The fastest and the median round's per-call ms of `kernel` over `copies`.
TimeStats TimeKernel(const Flags& f, const std::vector<Copy>& copies,
                     kernels::H3StepKernel kernel, int sequences_per_block,
                     cudaStream_t stream) {
  return Summarize(
      TimeRounds(f, static_cast<int>(copies.size()), stream, [&](int i) {
        H3_BENCH_CUDA_CHECK(kernels::H3StepCuda(
            copies[i].params, stream, kernels::LaunchOrder::kAfterPrior, kernel,
            sequences_per_block));
      }));
}

int Run(const Flags& f) {
  if (const int status = UseDevice(f.device, "h3_step_bench")) return status;
  cudaStream_t stream;
  H3_BENCH_CUDA_CHECK(cudaStreamCreate(&stream));
  const Bandwidth bw = MeasureBandwidth(f.device, f.copy_mib << 20, stream);
  const H3Shape shape{f.d, 1, f.n};
  const std::vector<float> host_weights = HostWeights(shape);
  Json records = Json::array();
  for (const std::string& type_name : f.types) {
    const ElementType type = *ParseType(type_name);  // CLI checked it
    for (const int batch : f.batches) {
      const int64_t bytes = kernels::H3StepBytes(shape, batch);
      const int copies = CopiesPast(f, bytes, 2);
      std::vector<Copy> layer(copies);
      for (int c = 0; c < copies; ++c) {
        MakeCopy(shape, type, batch, host_weights, 100 + 2 * c, stream,
                 &layer[c]);
      }
      H3_BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
      // (name, kernel, sequences a block: 0 for the rule)
      std::vector<std::tuple<std::string, kernels::H3StepKernel, int>> runs = {
          {"auto", kernels::H3StepKernel::kAuto, 0},
          {"runtime_lanes", kernels::H3StepKernel::kRuntimeLanes, 0}};
      for (const int spb : f.sequences_per_block) {
        runs.emplace_back("auto_spb" + std::to_string(spb),
                          kernels::H3StepKernel::kAuto, spb);
      }
      for (const auto& [name, kernel, spb] : runs) {
        const TimeStats t = TimeKernel(f, layer, kernel, spb, stream);
        const double gbps = bytes / (t.min * 1e6);
        records.push_back({{"type", type_name},
                           {"batch", batch},
                           {"kernel", name},
                           {"sequences_per_block", spb},
                           {"ms", t.min},
                           {"ms_median_round", t.median},
                           {"bytes", bytes},
                           {"copies", copies},
                           {"gb_per_s", gbps},
                           {"fraction_of_copy", gbps * 1e9 / bw.measured}});
        std::cerr << type_name << " batch " << batch << " " << name << ": "
                  << t.min * 1e3 << " us (" << gbps << " GB/s)\n";
      }
    }
  }
  const Json report = {
      {"benchmark", "h3_step_bench"},
      {"build", BuildJson()},
      {"device", DeviceJson(f.device)},
      {"bandwidth", BandwidthJson(bw)},
      {"shape", {{"d_model", f.d}, {"head_dim", 1}, {"d_state", f.n}}},
      {"method",
       "per-call mean of the fastest of --rounds rounds of --reps calls, "
       "layers (parameters, states, inputs) rotated through copies past "
       "--rotate-mib; gb_per_s = H3StepBytes / ms; fraction_of_copy against "
       "bandwidth.measured_gb_per_s"},
      {"reps", f.reps},
      {"rounds", f.rounds},
      {"results", records}};
  return WriteReport(report, f.out, "h3_step_bench");
}

}  // namespace
}  // namespace h3::bench

int main(int argc, char** argv) {
  CLI::App app{"Times the GPU decode step's kernels (JSON)", "h3_step_bench"};
  h3::bench::Flags f;
  app.add_option("--types", f.types)
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  app.add_option("--batches", f.batches)
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--d", f.d, "d_model")->check(CLI::Range(8, 65536));
  app.add_option("--n", f.n, "d_state (even)")->check(CLI::Range(2, 256));
  app.add_option("--sequences-per-block", f.sequences_per_block,
                 "also time the auto kernel with each of these numbers of "
                 "sequences a block (records auto_spb<N>)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  h3::bench::AddTimingFlags(app, &f, "layer");
  CLI11_PARSE(app, argc, argv);
  if (f.n % 2 != 0) {
    std::cerr << "h3_step_bench: --n " << f.n << " must be even\n";
    return 2;
  }
  return h3::bench::Run(f);
}
