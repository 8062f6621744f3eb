// h3_gemm_bench: times the CPU backend's matrix product GemmCpu
// (kernels/cpu/gemm.h) against OpenBLAS cblas_sgemm with the same thread
// count and, for up to 64 rows, against the former decode kernel (a frozen
// copy, bench/skinny_gemm_baseline.h), on the H3-125M shapes. Prints JSON.
//
// bench/results/gemm_cpu_debian12_2core.json was written by
//   H3_NUM_THREADS=2 build-cpu/bench/h3_gemm_bench
//       --out bench/results/gemm_cpu_debian12_2core.json
// (one command line).
//
// Every case runs its contenders in turn, round after round (one untimed
// warm-up round, then --rounds timed ones); a round repeats a call for at
// least --round-seconds and keeps the time per call. The figures are the
// medians over rounds; the ratios are the medians of the per-round ratios,
// so that a drift in the machine's speed moves both sides. OpenBLAS's
// threads spin for a while after each call: the program sleeps after every
// OpenBLAS round so that they do not steal a core from the next contender.
// The threads that run our kernels (the main thread and the ParallelFor
// pool's) are pinned to processors 0, 1, ... (--pin, on by default): after
// such a sleep the Linux scheduler was seen to wake the pool's worker on the
// main thread's processor and keep both there for tens of milliseconds,
// halving a two-thread round. OpenBLAS's own workers spin instead of
// sleeping, which keeps them on their processors.
#include <cblas.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/build_info.h"
#include "base/parallel.h"
#include "bench/skinny_gemm_baseline.h"
#include "kernels/cpu/gemm.h"
#include "nlohmann/json.hpp"
#include "tests/support/random.h"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  int64_t n, k;
};

// H3-125M's products: y [rows, n] = x [rows, k] W^T.
constexpr Shape kShapes[] = {{"qkv", 2304, 768},
                             {"out", 768, 768},
                             {"fc1", 3072, 768},
                             {"fc2", 768, 3072},
                             {"lm_head", 50264, 768}};

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      return line.substr(line.find(':') + 2);
    }
  }
  return "unknown";
}

// The first line of /proc/loadavg: how busy the machine was (other
// processes share its cores).
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Seconds per call of fn, repeated for at least min_seconds (once at least).
double TimeRound(const std::function<void()>& fn, double min_seconds) {
  int64_t calls = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_seconds);
  return elapsed / calls;
}

bool pin_threads = true;

// Pins the calling thread, the first time it asks, to the next processor
// (the main thread, which asks first, to processor 0). No-op unless
// pin_threads.
void PinThisThread() {
  static std::atomic<int> next{0};
  thread_local bool pinned = false;
  if (!pin_threads || pinned) return;
  pinned = true;
  const int cpus = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(next++ % cpus, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// fn(part, parts) for part in [0, parts), on `threads` threads of the pool.
void Split(int threads, const std::function<void(int64_t, int64_t)>& fn) {
  if (threads == 1) return fn(0, 1);
  ParallelFor(threads, 1, [&](int64_t begin, int64_t end) {
    PinThisThread();
    for (int64_t part = begin; part < end; ++part) fn(part, threads);
  });
}

struct Flags {
  std::vector<int64_t> rows = {1, 4, 16, 64, 256, 1024};
  std::vector<int> threads = {1, 2};
  std::vector<std::string> shapes = {"qkv", "out", "fc1", "fc2", "lm_head"};
  int rounds = 5;
  double round_seconds = 0.05;
  std::string out;
  kernels::GemmIsa isa = kernels::GemmSelectedIsa();
};

Json RunCase(const Shape& shape, int64_t rows, int threads,
             const Flags& flags) {
  const int64_t n = shape.n, k = shape.k;
  const auto x = h3::testing::RandomNormal(rows * k, 1);
  const auto w = h3::testing::RandomNormal(n * k, 2);
  std::vector<float> packed(kernels::GemmPackedFloats(n, k));
  kernels::GemmPack(w.data(), n, k, packed.data());
  std::vector<float> y_ours(rows * n), y_blas(rows * n), y_skinny(rows * n);
  const int64_t panels = kernels::GemmPanels(n);

  std::map<std::string, std::function<void()>> runs;
  runs["ours"] = [&] {
    Split(threads, [&](int64_t part, int64_t parts) {
      kernels::GemmCpuWithIsa(flags.isa, x.data(), packed.data(), y_ours.data(),
                              rows, n, k, panels * part / parts,
                              panels * (part + 1) / parts);
    });
  };
  runs["openblas"] = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0f,
                x.data(), k, w.data(), k, 0.0f, y_blas.data(), n);
  };
  if (rows <= 64) {
    runs["skinny"] = [&] {
      Split(threads, [&](int64_t part, int64_t parts) {
        SkinnyGemmBaseline(x.data(), w.data(), y_skinny.data(), rows, n, k,
                           n * part / parts, n * (part + 1) / parts);
      });
    };
  }
  openblas_set_num_threads(threads);
  std::map<std::string, std::vector<double>> seconds;
  for (int round = 0; round <= flags.rounds; ++round) {
    for (const auto& [name, fn] : runs) {
      const double s = TimeRound(fn, flags.round_seconds);
      if (round > 0) seconds[name].push_back(s);
      if (name == "openblas" && threads > 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      }
    }
  }
  double max_diff = 0;
  for (int64_t e = 0; e < rows * n; ++e) {
    max_diff = std::max<double>(max_diff, std::abs(y_ours[e] - y_blas[e]));
  }
  const double flop = 2.0 * rows * n * k;
  Json result = {{"shape", shape.name},
                 {"n", n},
                 {"k", k},
                 {"rows", rows},
                 {"threads", threads}};
  for (const auto& [name, s] : seconds) {
    result[name] = {{"seconds", Median(s)}, {"gflops", flop / Median(s) / 1e9}};
  }
  for (const char* base : {"openblas", "skinny"}) {
    if (!seconds.count(base)) continue;
    std::vector<double> ratios;
    for (int r = 0; r < flags.rounds; ++r) {
      ratios.push_back(seconds[base][r] / seconds["ours"][r]);
    }
    result[std::string("speed_vs_") + base] = Median(ratios);
  }
  result["max_abs_diff_vs_openblas"] = max_diff;
  return result;
}

int Main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"GemmCpu against OpenBLAS and the former skinny kernel"};
  app.add_option("--rows", flags.rows, "row counts");
  app.add_option("--threads", flags.threads, "thread counts (<= NumThreads)");
  app.add_option("--shapes", flags.shapes, "qkv out fc1 fc2 lm_head");
  app.add_option("--rounds", flags.rounds, "timed rounds per case");
  app.add_option("--round-seconds", flags.round_seconds,
                 "least seconds of one round");
  app.add_option("--out", flags.out, "JSON file (default: stdout)");
  app.add_option("--pin", pin_threads,
                 "pin our kernels' threads to processors 0, 1, ...");
  std::string isa = kernels::GemmIsaName(flags.isa);
  app.add_option("--isa", isa, "our kernels: avx512, avx2 or portable")
      ->check(CLI::IsMember({"avx512", "avx2", "portable"}));
  CLI11_PARSE(app, argc, argv);
  for (kernels::GemmIsa candidate :
       {kernels::GemmIsa::kPortable, kernels::GemmIsa::kAvx2,
        kernels::GemmIsa::kAvx512}) {
    if (isa == kernels::GemmIsaName(candidate)) flags.isa = candidate;
  }
  if (!kernels::GemmIsaSupported(flags.isa)) {
    std::cerr << "this CPU cannot run --isa " << isa << "\n";
    return 2;
  }
  PinThisThread();

  const std::string load_before = LoadAverage();
  Json results = Json::array();
  for (const std::string& name : flags.shapes) {
    const Shape* shape = nullptr;
    for (const Shape& s : kShapes) {
      if (name == s.name) shape = &s;
    }
    if (shape == nullptr) {
      std::cerr << "unknown shape " << name << "\n";
      return 2;
    }
    for (int64_t rows : flags.rows) {
      for (int threads : flags.threads) {
        if (threads > NumThreads()) continue;
        Json r = RunCase(*shape, rows, threads, flags);
        std::cerr << name << " rows " << rows << " threads " << threads
                  << ": ours " << r["ours"]["gflops"].get<double>()
                  << " GFLOP/s, openblas "
                  << r["openblas"]["gflops"].get<double>() << " (x"
                  << r["speed_vs_openblas"].get<double>() << ")";
        if (r.contains("skinny")) {
          std::cerr << ", skinny " << r["skinny"]["gflops"].get<double>()
                    << " (x" << r["speed_vs_skinny"].get<double>() << ")";
        }
        std::cerr << "\n";
        results.push_back(std::move(r));
      }
    }
  }
  Json report = {
      {"benchmark", "h3_gemm_bench"},
      {"cpu", CpuModel()},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"git_commit", GetBuildInfo().git_commit},
      {"gemm_isa", kernels::GemmIsaName(flags.isa)},
      {"openblas", openblas_get_config()},
      {"openblas_core", openblas_get_corename()},
      {"rounds", flags.rounds},
      {"round_seconds", flags.round_seconds},
      {"pinned", pin_threads},
      {"loadavg_before", load_before},
      {"loadavg_after", LoadAverage()},
      {"note",
       "seconds and gflops: medians over rounds of the time per call; "
       "speed_vs_X: median over rounds of X's seconds / ours (above 1: ours "
       "faster)"},
      {"results", results}};
  if (flags.out.empty()) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::ofstream(flags.out) << report.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace h3::bench

int main(int argc, char** argv) { return h3::bench::Main(argc, argv); }
