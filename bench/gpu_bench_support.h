#ifndef H3_BENCH_GPU_BENCH_SUPPORT_H_
#define H3_BENCH_GPU_BENCH_SUPPORT_H_

// What the GPU benchmarks share: the device check (every one), and for
// h3_linear_bench and h3_step_bench their timing flags, rounds of timed
// calls, the build's facts and the report's writing. Compiled by the host
// compiler (CUDA runtime API only).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/build_info.h"
#include "bench/flashconv_device.h"
#include "nlohmann/json.hpp"

namespace h3::bench {

// 0 with `device` current; 2 (and why, on stderr, "PROGRAM: no CUDA device
// N (...)") when there is no such device.
inline int UseDevice(int device, const char* program) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= device) {
    std::cerr << program << ": no CUDA device " << device << " ("
              << (err != cudaSuccess ? cudaGetErrorString(err)
                                     : std::to_string(count) + " found")
              << ")\n";
    return 2;
  }
  H3_BENCH_CUDA_CHECK(cudaSetDevice(device));
  return 0;
}

// The timing options: --rounds rounds of --reps calls cycling through
// copies of the operands past --rotate-mib, the bandwidth copy's size, the
// device and the report's file.
struct TimingFlags {
  int reps = 50;
  int rounds = 3;
  int64_t rotate_mib = 512;
  int64_t copy_mib = 1024;
  int device = 0;
  std::string out;
};

// Adds TimingFlags' options to `app`; `copies` names what rotates.
inline void AddTimingFlags(CLI::App& app, TimingFlags* f,
                           const std::string& copies) {
  app.add_option("--reps", f->reps)->check(CLI::PositiveNumber);
  app.add_option("--rounds", f->rounds)->check(CLI::PositiveNumber);
  app.add_option("--rotate-mib", f->rotate_mib,
                 copies + " copies to cycle through, in all (past the L2 size)")
      ->check(CLI::PositiveNumber);
  app.add_option("--copy-mib", f->copy_mib, "size of the bandwidth copy")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", f->device)->check(CLI::NonNegativeNumber);
  app.add_option("--out", f->out, "the JSON file (default: stdout)");
}

// Copies of `bytes` each that pass --rotate-mib together, at least `least`.
inline int CopiesPast(const TimingFlags& f, int64_t bytes, int64_t least) {
  return static_cast<int>(
      std::max<int64_t>(least, ((f.rotate_mib << 20) + bytes - 1) / bytes));
}

// Per-call ms of each of f.rounds rounds of f.reps calls run(i % copies),
// each round between two CUDA events on `stream`, after 3 untimed calls.
template <typename Run>
std::vector<double> TimeRounds(const TimingFlags& f, int copies,
                               cudaStream_t stream, Run run) {
  const int reps = f.reps;
  for (int i = 0; i < 3; ++i) run(i % copies);
  cudaEvent_t start, stop;
  H3_BENCH_CUDA_CHECK(cudaEventCreate(&start));
  H3_BENCH_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int round = 0; round < f.rounds; ++round) {
    H3_BENCH_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < reps; ++i) run(i % copies);
    H3_BENCH_CUDA_CHECK(cudaEventRecord(stop, stream));
    H3_BENCH_CUDA_CHECK(cudaEventSynchronize(stop));
    float total = 0;
    H3_BENCH_CUDA_CHECK(cudaEventElapsedTime(&total, start, stop));
    ms.push_back(total / reps);
  }
  H3_BENCH_CUDA_CHECK(cudaEventDestroy(start));
  H3_BENCH_CUDA_CHECK(cudaEventDestroy(stop));
  return ms;
}

// The build's commit, type and CUDA version.
inline nlohmann::ordered_json BuildJson() {
  const BuildInfo& build = GetBuildInfo();
  return {{"git_commit", build.git_commit},
          {"build_type", build.build_type},
          {"cuda_version", build.cuda_version}};
}

// `report` on stdout when `out` is empty, else in the file `out`; 0, or 1
// (and why, on stderr) when the file cannot be written.
inline int WriteReport(const nlohmann::ordered_json& report,
                       const std::string& out, const char* program) {
  if (out.empty()) {
    std::cout << report.dump(1) << "\n";
    return 0;
  }
  std::ofstream file(out);
  file << report.dump(1) << "\n";
  file.close();
  if (!file) {
    std::cerr << program << ": cannot write " << out << "\n";
    return 1;
  }
  return 0;
}

}  // namespace h3::bench

#endif  // H3_BENCH_GPU_BENCH_SUPPORT_H_
