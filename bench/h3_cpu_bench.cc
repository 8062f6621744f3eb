// h3_cpu_bench: the H3 layer's CPU kernels at the released models' shapes
// (head_dim 1, N = 64): the recurrent prefill H3ScanCpu against the FFT
// prefill H3PrefillCpu, and the vectorised H3StepCpu against the scalar step
// it replaced (kept below as OldStepCpu). Prints JSON. The committed results:
//
//   build-cpu/bench/h3_cpu_bench --threads 1,2 >
//       bench/results/h3_cpu_debian12_2core.json
//
// --threads runs each count in a child process with H3_NUM_THREADS set (the
// thread pool's size is fixed per process); --filter keeps the cases whose
// name it matches (a regular expression, e.g. 'scan_d768_L1024_first$'); --reps
// sets the timed repetitions (medians reported), after one untimed warm-up.
//
// Prefill cases: one chunk of L tokens of a sequence, d channels; "first"
// starts a new sequence (position 0, zero state), "continued" carries a
// random state in at position 100000 (the FFT prefill then also runs its
// state passing). The scan reads the fused q|k|v rows [L, 3d] as the engine
// passes them; the FFT prefill reads separate [L, d] arrays and gets its
// kernel spectrum precomputed, as the engine used to. Step cases: `batch`
// sequences at different positions, each with its own state, fused rows.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/build_info.h"
#include "base/parallel.h"
#include "kernels/h3.h"
#include "nlohmann/json.hpp"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using kernels::H3Shape;
using kernels::H3State;
using kernels::H3StepParams;

// The step H3StepCpu was before the recurrence was vectorised (commit
// 2128013, kernels/cpu/h3_step.cc): scalar per (sequence, head), sums in
// sequence order. Kept to measure against.
void OldStepHead(const H3StepParams& p, int b, int h, std::vector<float>& kbar,
                 std::vector<float>& y) {
  using cfloat = std::complex<float>;
  const H3Shape& shape = p.w.shape;
  const int d = shape.d_model, pd = shape.head_dim, heads = shape.heads();
  const int n_state = shape.d_state, modes = shape.modes();
  const size_t row =
      static_cast<size_t>(b) *
      static_cast<size_t>(p.input_stride > 0 ? p.input_stride : d);
  const float* q = static_cast<const float*>(p.q) + row;
  const float* k = static_cast<const float*>(p.k) + row;
  const float* v = static_cast<const float*>(p.v) + row;
  const H3State& state = p.states[b];
  const int64_t pos = p.positions[b];
  const int newest = static_cast<int>(pos % n_state);
  const int taps = static_cast<int>(std::min<int64_t>(pos, n_state - 1)) + 1;
  for (int i = 0; i < pd; ++i) {
    const int c = h * pd + i;
    float* ring = state.shift + static_cast<size_t>(c) * n_state;
    const float* kshift = p.w.shift_kernel + static_cast<size_t>(c) * n_state;
    ring[newest] = k[c];
    float sum = p.w.shift_D[c] * k[c];
    for (int j = 0; j < taps; ++j) {
      const int slot = newest - j < 0 ? newest - j + n_state : newest - j;
      sum += kshift[j] * ring[slot];
    }
    kbar[i] = sum;
  }
  const size_t param = static_cast<size_t>(h) * modes;
  const cfloat* dA = reinterpret_cast<const cfloat*>(p.w.dA) + param;
  const cfloat* dB = reinterpret_cast<const cfloat*>(p.w.dB) + param;
  const cfloat* C = reinterpret_cast<const cfloat*>(p.w.C) + param;
  for (int d1 = 0; d1 < pd; ++d1) {
    for (int d2 = 0; d2 < pd; ++d2) {
      const float kv = kbar[d1] * v[h * pd + d2];
      const size_t channel = static_cast<size_t>(d1 * pd + d2) * heads + h;
      cfloat* x = reinterpret_cast<cfloat*>(state.diag) + channel * modes;
      float sum = 0;
      for (int m = 0; m < modes; ++m) {
        x[m] = dA[m] * x[m] + dB[m] * kv;
        sum += (C[m] * x[m]).real();
      }
      y[d1 * pd + d2] = 2.0f * sum + p.w.D[h] * kv;
    }
  }
  float* out = static_cast<float*>(p.out) + static_cast<size_t>(b) * d;
  for (int d2 = 0; d2 < pd; ++d2) {
    float sum = 0;
    for (int d1 = 0; d1 < pd; ++d1) sum += q[h * pd + d1] * y[d1 * pd + d2];
    out[d2 * heads + h] = sum;
  }
}

void OldStepCpu(const H3StepParams& p) {
  const int heads = p.w.shape.heads(), pd = p.w.shape.head_dim;
  const int64_t work = static_cast<int64_t>(p.batch) * heads;
  ParallelFor(work, 1024, [&](int64_t begin, int64_t end) {
    std::vector<float> kbar(pd), y(pd * pd);
    for (int64_t i = begin; i < end; ++i) {
      OldStepHead(p, static_cast<int>(i / heads), static_cast<int>(i % heads),
                  kbar, y);
    }
  });
}

// A random state of a sequence far past its first ring turn.
void RandomState(std::vector<float>& shift, std::vector<float>& diag,
                 uint32_t seed) {
  shift = h3::testing::RandomNormal(shift.size(), seed);
  diag = h3::testing::RandomNormal(diag.size(), seed + 1);
}

// Seconds of each of `reps` runs of `run` after one untimed warm-up;
// `reset` (untimed) before every run.
std::vector<double> Time(int reps, const std::function<void()>& reset,
                         const std::function<void()>& run) {
  std::vector<double> seconds;
  for (int r = 0; r <= reps; ++r) {
    reset();
    const Clock::time_point begin = Clock::now();
    run();
    const double s =
        std::chrono::duration<double>(Clock::now() - begin).count();
    if (r > 0) seconds.push_back(s);
  }
  return seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2]
                           : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

Json Record(const std::string& name, const std::vector<double>& seconds,
            double channel_tokens) {
  const double median = Median(seconds);
  return Json{
      {"case", name},
      {"median_s", median},
      {"min_s", *std::min_element(seconds.begin(), seconds.end())},
      {"ns_per_channel_token", 1e9 * median / channel_tokens},
      {"seconds", seconds},
  };
}

struct Flags {
  std::string threads;  // "1,2": children; empty: this process
  std::string filter;
  int reps = 5;
};

// Whether the filter (a regular expression) matches any of the names.
bool Wanted(const Flags& flags, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (std::regex_search(name, std::regex(flags.filter))) return true;
  }
  return false;
}

void PrefillCases(const Flags& flags, int d, Json& out) {
  const H3Shape shape{d, 1, 64};
  const h3::testing::RandomH3Layer layer(shape, 1);
  const kernels::H3RecurrentWeightsCpu weights(layer.weights());
  h3::testing::H3StateBuffers state(shape), saved(shape);
  for (int64_t len : {256, 1024, 4096}) {
    const std::string size =
        "_d" + std::to_string(d) + "_L" + std::to_string(len) + "_";
    if (!Wanted(flags, {"scan" + size + "first", "scan" + size + "continued",
                        "fft" + size + "first", "fft" + size + "continued"})) {
      continue;
    }
    const std::vector<float> qkv = h3::testing::RandomNormal(3 * len * d, 2);
    std::vector<float> q(len * d), k(len * d), v(len * d), y(len * d);
    for (int64_t t = 0; t < len; ++t) {
      std::copy_n(qkv.begin() + 3 * t * d, d, q.begin() + t * d);
      std::copy_n(qkv.begin() + 3 * t * d + d, d, k.begin() + t * d);
      std::copy_n(qkv.begin() + 3 * t * d + 2 * d, d, v.begin() + t * d);
    }
    const int nfft = kernels::H3FftSize(len);
    std::vector<float> spectrum(2 * shape.heads() * (nfft / 2 + 1));
    kernels::H3KernelSpectrum(layer.weights(), nfft, spectrum.data());
    for (const bool continued : {false, true}) {
      const int64_t start = continued ? 100000 : 0;
      if (continued) {
        RandomState(saved.shift, saved.diag, 3);
      } else {
        std::fill(saved.shift.begin(), saved.shift.end(), 0.0f);
        std::fill(saved.diag.begin(), saved.diag.end(), 0.0f);
      }
      auto reset = [&] { state = saved; };
      const std::string tail = size + (continued ? "continued" : "first");
      if (Wanted(flags, {"scan" + tail})) {
        kernels::H3ScanParams p;
        p.w.shape = shape;
        p.start = start;
        p.length = len;
        p.q = qkv.data();
        p.k = qkv.data() + d;
        p.v = qkv.data() + 2 * d;
        p.input_stride = 3 * d;
        p.out = y.data();
        p.state = state.view();
        out.push_back(Record(
            "scan" + tail,
            Time(flags.reps, reset, [&] { kernels::H3ScanCpu(p, weights); }),
            double(len) * d));
      }
      if (Wanted(flags, {"fft" + tail})) {
        const kernels::H3PrefillParams p{
            layer.weights(), start,    len,          q.data(),        k.data(),
            v.data(),        y.data(), state.view(), spectrum.data(), nfft};
        out.push_back(
            Record("fft" + tail,
                   Time(flags.reps, reset, [&] { kernels::H3PrefillCpu(p); }),
                   double(len) * d));
      }
    }
  }
}

void StepCases(const Flags& flags, int d, Json& out) {
  constexpr int kSteps = 16;  // per timed run
  const H3Shape shape{d, 1, 64};
  const h3::testing::RandomH3Layer layer(shape, 1);
  const kernels::H3RecurrentWeightsCpu weights(layer.weights());
  for (int batch : {1, 16, 64}) {
    const std::string tail =
        "_d" + std::to_string(d) + "_batch" + std::to_string(batch);
    if (!Wanted(flags, {"step_old" + tail, "step_new" + tail})) continue;
    std::vector<h3::testing::H3StateBuffers> states(
        batch, h3::testing::H3StateBuffers(shape));
    for (int b = 0; b < batch; ++b) {
      RandomState(states[b].shift, states[b].diag, 10 + b);
    }
    const std::vector<h3::testing::H3StateBuffers> saved = states;
    std::vector<H3State> views;
    std::vector<int64_t> positions;
    for (int b = 0; b < batch; ++b) {
      views.push_back(states[b].view());
      positions.push_back(100000 + 37 * b);
    }
    const std::vector<float> qkv = h3::testing::RandomNormal(3 * batch * d, 4);
    std::vector<float> y(batch * d);
    H3StepParams p{layer.weights(),    batch,    qkv.data(),   qkv.data() + d,
                   qkv.data() + 2 * d, y.data(), views.data(), 3 * d,
                   positions.data()};
    auto reset = [&] { states = saved; };
    const double work = double(kSteps) * batch * d;
    auto steps = [&](const std::function<void()>& step) {
      return [&, step] {
        for (int s = 0; s < kSteps; ++s) {
          step();
          for (int64_t& pos : positions) ++pos;
        }
      };
    };
    if (Wanted(flags, {"step_old" + tail})) {
      out.push_back(
          Record("step_old" + tail,
                 Time(flags.reps, reset, steps([&] { OldStepCpu(p); })), work));
    }
    if (Wanted(flags, {"step_new" + tail})) {
      out.push_back(Record("step_new" + tail,
                           Time(flags.reps, reset,
                                steps([&] { kernels::H3StepCpu(p, weights); })),
                           work));
    }
  }
}

// Median time ratios of the pairs of cases that differ only in their
// kernel: fft / scan and step_old / step_new (> 1: the new one is faster).
Json Speedups(const Json& cases) {
  std::map<std::string, double> median;
  for (const Json& c : cases) median[c["case"]] = c["median_s"];
  Json speedups = Json::object();
  for (const auto& [name, seconds] : median) {
    for (const auto& [slow, fast] :
         {std::pair<std::string, std::string>{"fft", "scan"},
          {"step_old", "step_new"}}) {
      if (name.rfind(fast + "_", 0) != 0) continue;
      const std::string rest = name.substr(fast.size());
      const auto other = median.find(slow + rest);
      if (other != median.end()) {
        speedups[slow + "/" + fast + rest] = other->second / seconds;
      }
    }
  }
  return speedups;
}

// This process's cases, at its thread count.
Json RunHere(const Flags& flags) {
  Json cases = Json::array();
  for (int d : {768, 2048}) {
    PrefillCases(flags, d, cases);
    StepCases(flags, d, cases);
  }
  return Json{
      {"threads", NumThreads()},
      {"speedups", Speedups(cases)},
      {"cases", cases},
  };
}

// The first line of a text file ("" if unreadable), e.g. /proc/loadavg.
std::string FirstLine(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return "";
}

// Each thread count in a child process (this program, H3_NUM_THREADS set).
int RunChildren(const Flags& flags, const char* self) {
  const std::string load_before = FirstLine("/proc/loadavg", "");
  Json runs = Json::array();
  std::stringstream counts(flags.threads);
  for (std::string count; std::getline(counts, count, ',');) {
    const std::string command = "H3_NUM_THREADS=" + count + " '" + self +
                                "' --reps " + std::to_string(flags.reps) +
                                " --filter '" + flags.filter + "'";
    FILE* child = popen(command.c_str(), "r");
    if (child == nullptr) return 1;
    std::string text;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), child)) > 0;) {
      text.append(buf, n);
    }
    if (pclose(child) != 0) return 1;
    Json run = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (run.is_discarded()) return 1;
    runs.push_back(std::move(run));
  }
  const Json result{
      {"benchmark", "h3_cpu"},
      {"commit", GetBuildInfo().git_commit},
      {"build_type", GetBuildInfo().build_type},
      {"cpu", FirstLine("/proc/cpuinfo", "model name\t: ")},
      {"hardware_threads", sysconf(_SC_NPROCESSORS_ONLN)},
      // Other work on the machine shows here: the load average when the
      // runs began.
      {"loadavg_before", load_before},
      {"shape", {{"head_dim", 1}, {"d_state", 64}}},
      {"units",
       "ns_per_channel_token: median seconds / (tokens x d), "
       "steps: 16 steps per timed run"},
      {"runs", runs},
  };
  std::cout << result.dump(1) << std::endl;
  return 0;
}

}  // namespace
}  // namespace h3::bench

int main(int argc, char** argv) {
  h3::bench::Flags flags;
  CLI::App app("Times the H3 layer's CPU kernels; prints JSON.");
  app.add_option("--threads", flags.threads,
                 "Thread counts, comma-separated, one child process each");
  app.add_option("--filter", flags.filter,
                 "Only cases whose name this regular expression matches");
  app.add_option("--reps", flags.reps, "Timed repetitions per case")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (!flags.threads.empty()) {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return 1;
    self[n] = '\0';
    return h3::bench::RunChildren(flags, self);
  }
  std::cout << h3::bench::RunHere(flags).dump() << std::endl;
  return 0;
}
