// h3_flashconv_bench: one H3 layer's GPU prefill (H3PrefillCuda::Run) on the
// fused FlashConv kernel, the chunked kernel (--paths chunked) and the cuFFT
// path, side by side in one process, next to the HBM floor. Prints a table
// on stdout and writes JSON (--out).
// Driven by bench/flashconv_bench.py, which writes
// bench/results/flashconv_<device>.json.
//
//   h3_flashconv_bench [--shapes 64x768,8x1024]
//       [--lengths 256,512,1024,2048,4096,8192,16384,32768]
//       [--types fp16,bf16] [--paths fused,cufft] (or chunked, chunked_mma)
//       [--d-state 64]
//       [--warmup 3] [--min-time-ms 200] [--min-reps 5] [--max-reps 10000]
//       [--memory-fraction 0.6] [--flush-l2 | --no-flush-l2]
//       [--copy-mib 1024] [--seed 1] [--device 0] [--packed] [--rows]
//       [--out FILE]
//
// Method (also in the JSON): per shape (BATCHxHEADS: d_model = H, head_dim 1)
// one random layer in S4D's ranges and N(0, 1) inputs, channel-major
// [B, d, L]. Every call starts from zero states: cudaMemsetAsync zeroes them
// before each call, and then (--flush-l2, the default) writes twice the L2
// size to evict it, both outside the timed region, which is CUDA events
// around Run alone. Per case: one call per path for the correctness guard
// (each other path against cuFFT), --warmup untimed calls, then timed calls
// for at least --min-time-ms and --min-reps (at most --max-reps), the paths
// alternating call by call, all enqueued before one synchronisation.
// Reported: median, min and p90 ms per call, and the floor
// (bench/flashconv_floor.h) at the measured copy bandwidth and at the
// theoretical peak.
//
// --packed times each path in two modes instead: the batch as one
// H3PrefillCuda::RunPacked call of BATCH segments ("packed") and as BATCH
// batch-1 Run calls ("singles"), both over the packed step's layout
// [d, B * L] (segment b at row b * L), each call timed as above.
//
// --rows adds mode "rows" to those modes (batch, or packed and singles): the
// batch as one RunPacked call of BATCH segments over the engine's packed
// rows (H3PrefillCuda::RunsRows), q, k, v the columns [0, d), [d, 2d),
// [2d, 3d) of [B * L, 3d] (segment b at row b * L) and out [B * L, d]. Once
// per case, untimed, q, k, v are copied into those rows from the first
// mode's channel-major tensors, so the call reads the same values; its guard
// output is transposed back to that layout and compared with cuFFT's
// first-mode call. Only the chunked paths (chunked, chunked_mma) take such
// calls; on the others the mode is skipped, with the reason.
//
// Exit status: 0; 1 on a CUDA failure (the call and the error are printed)
// or an unwritable --out; 2 without a CUDA device.
#include <algorithm>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/build_info.h"
#include "bench/flashconv_cases.h"
#include "bench/flashconv_report.h"
#include "bench/gpu_bench_support.h"
#include "nlohmann/json.hpp"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;
using kernels::H3PrefillPath;

struct Flags {
  std::vector<std::string> shapes = {"64x768", "8x1024"};
  std::vector<int64_t> lengths = {256,  512,  1024,  2048,
                                  4096, 8192, 16384, 32768};
  std::vector<std::string> types = {"fp16", "bf16"};
  std::vector<std::string> paths = {"fused", "cufft"};
  int d_state = 64;
  int warmup = 3;
  double min_time_ms = 200;
  int min_reps = 5;
  int max_reps = 10000;
  double memory_fraction = 0.6;
  bool flush_l2 = true;
  int64_t copy_mib = 1024;
  uint64_t seed = 1;
  int device = 0;
  bool packed = false;
  bool rows = false;
  std::string out;
};

std::string LocalTimeNow() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[40];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S%z", &local);
  return text;
}

Json OptionsJson(const Flags& f, int64_t l2_flush_bytes) {
  return {{"shapes", f.shapes},
          {"lengths", f.lengths},
          {"types", f.types},
          {"paths", f.paths},
          {"d_state", f.d_state},
          {"warmup", f.warmup},
          {"min_time_ms", f.min_time_ms},
          {"min_reps", f.min_reps},
          {"max_reps", f.max_reps},
          {"memory_fraction", f.memory_fraction},
          {"flush_l2", f.flush_l2},
          {"l2_flush_bytes", l2_flush_bytes},
          {"copy_mib", f.copy_mib},
          {"seed", f.seed},
          {"device", f.device},
          {"packed", f.packed},
          {"rows", f.rows}};
}

// Drops repeated entries, keeping the first of each.
void DropRepeats(std::vector<std::string>& v) {
  std::vector<std::string> kept;
  for (std::string& s : v) {
    if (std::find(kept.begin(), kept.end(), s) == kept.end()) kept.push_back(s);
  }
  v = std::move(kept);
}

int Run(Flags f, const std::string& command) {
  if (const int status = UseDevice(f.device, "h3_flashconv_bench")) {
    return status;
  }
  std::ofstream file;
  if (!f.out.empty()) {
    file.open(f.out);
    if (!file) {
      std::cerr << "h3_flashconv_bench: cannot write " << f.out << "\n";
      return 1;
    }
  }
  cudaStream_t stream;
  H3_BENCH_CUDA_CHECK(cudaStreamCreate(&stream));

  CaseOptions o;
  std::sort(f.lengths.begin(), f.lengths.end());
  f.lengths.erase(std::unique(f.lengths.begin(), f.lengths.end()),
                  f.lengths.end());
  o.lengths = f.lengths;
  DropRepeats(f.shapes);
  DropRepeats(f.types);
  DropRepeats(f.paths);
  for (const std::string& t : f.types) o.types.push_back(*ParseType(t));
  for (const std::string& p : f.paths) {
    o.paths.push_back(p == "fused"         ? H3PrefillPath::kFused
                      : p == "chunked"     ? H3PrefillPath::kChunked
                      : p == "chunked_mma" ? H3PrefillPath::kChunkedMma
                                           : H3PrefillPath::kCufft);
  }
  o.d_state = f.d_state;
  o.warmup = f.warmup;
  o.min_time_ms = f.min_time_ms;
  o.min_reps = f.min_reps;
  o.max_reps = std::max(f.max_reps, f.min_reps);
  o.memory_fraction = f.memory_fraction;
  o.seed = f.seed;
  o.packed = f.packed;
  o.rows = f.rows;
  if (f.flush_l2) {
    // Twice the L2 size: a write of that much leaves none of the previous
    // call's lines behind.
    int l2 = 0;
    H3_BENCH_CUDA_CHECK(
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, f.device));
    o.l2_flush_bytes = 2 * int64_t{l2};
  }

  const Json device = DeviceJson(f.device);
  const Bandwidth bw = MeasureBandwidth(f.device, f.copy_mib << 20, stream);
  std::vector<CaseResult> cases;
  for (const std::string& text : f.shapes) {
    for (CaseResult& r : MeasureShape(*ParseShape(text), o, stream)) {
      cases.push_back(std::move(r));
    }
  }
  H3_BENCH_CUDA_CHECK(cudaStreamDestroy(stream));
  PrintTable(cases, bw);
  if (f.out.empty()) {
    std::cerr << "h3_flashconv_bench: no --out, so no JSON written\n";
    return 0;
  }

  const BuildInfo& build = GetBuildInfo();
  Json records = Json::array();
  for (const CaseResult& r : cases) {
    for (const PathResult& p : r.paths) records.push_back(CaseJson(r, p, bw));
  }
  const Json report = {
      {"benchmark", "flashconv"},
      {"date", LocalTimeNow()},
      {"command", command},
      {"build",
       {{"version", build.version},
        {"git_commit", build.git_commit},
        {"build_type", build.build_type},
        {"cuda_version", build.cuda_version}}},
      {"device", device},
      {"options", OptionsJson(f, o.l2_flush_bytes)},
      {"method",
       "H3PrefillCuda::Run per path (mode batch), one random layer per shape "
       "(S4D ranges), N(0,1) inputs, channel-major. With packed, each path "
       "runs in mode packed (one RunPacked of `batch` segments of `length` "
       "tokens over [d, batch * length]) and mode singles (the same segments "
       "as `batch` batch-1 Run calls), each timed as one call; "
       "max_abs_diff_vs_singles compares their guard calls' outputs (0 "
       "expected: bit for bit). With rows, each path also runs in mode rows "
       "(one RunPacked of the same segments over the engine's packed rows: "
       "q, k, v the columns [0, d), [d, 2d), [2d, 3d) of [batch * length, "
       "3d], out [batch * length, d]), whose q|k|v rows are copied, untimed, "
       "from the first mode's q, k, v once per case; paths whose layer does "
       "not take rows (H3PrefillCuda::RunsRows: all but chunked and "
       "chunked_mma) skip it. Its "
       "guard output is transposed back to the first mode's layout and "
       "compared with cuFFT's first-mode call, and its speedup_vs_cufft is "
       "against that call's median. Before every call both states are "
       "zeroed by cudaMemsetAsync and, with flush_l2, l2_flush_bytes are "
       "written to evict L2, outside the timed region; CUDA events on "
       "one stream time the call alone. Per case: one guard call per "
       "path (diff_vs_cufft = max|path - cufft| / max|cufft| for every "
       "other path), warmup "
       "untimed calls, then timed calls (min_time_ms, min_reps, max_reps), "
       "the paths alternating call by call, all enqueued before one "
       "synchronisation; ms = median, min, p90 per call. floor_ms = "
       "bytes.floor / bandwidth (measured_gb_per_s, and peak_gb_per_s); "
       "fraction_of_floor = floor_ms / median ms."},
      {"bandwidth", BandwidthJson(bw)},
      {"reference_flashfftconv_published", ReferenceJson()},
      {"cases", records}};
  file << report.dump(1, ' ', false, Json::error_handler_t::replace) << "\n";
  file.close();
  if (!file) {
    std::cerr << "h3_flashconv_bench: cannot write " << f.out << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace h3::bench

int main(int argc, char** argv) {
  CLI::App app{
      "Times H3PrefillCuda's fused and cuFFT paths (table; --out JSON)",
      "h3_flashconv_bench"};
  h3::bench::Flags f;
  app.add_option("--shapes", f.shapes, "BATCHxHEADS,...")
      ->delimiter(',')
      ->check([](const std::string& s) -> std::string {
        return h3::bench::ParseShape(s) ? "" : "expected BATCHxHEADS: " + s;
      })
      ->capture_default_str();
  app.add_option("--lengths", f.lengths)
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--types", f.types)
      ->delimiter(',')
      ->check(CLI::IsMember({"fp16", "bf16", "fp32"}))
      ->capture_default_str();
  app.add_option("--paths", f.paths)
      ->delimiter(',')
      ->check(CLI::IsMember({"fused", "chunked", "chunked_mma", "cufft"}))
      ->capture_default_str();
  app.add_option("--d-state", f.d_state)
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", f.warmup)
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--min-time-ms", f.min_time_ms)
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--min-reps", f.min_reps)
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-reps", f.max_reps, "raised to --min-reps if lower")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--memory-fraction", f.memory_fraction,
                 "of the free device memory for our tensors; the rest is "
                 "left to the implementations' scratch")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_flag("--flush-l2,!--no-flush-l2", f.flush_l2,
               "evict L2 before each call (untimed), so that calls read "
               "from HBM as the floor assumes")
      ->capture_default_str();
  app.add_option("--copy-mib", f.copy_mib, "size of the bandwidth copy")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", f.seed)->capture_default_str();
  app.add_option("--device", f.device)
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--packed", f.packed,
               "time one RunPacked call of the batch against one Run per "
               "sequence (modes packed and singles) instead of the batch Run");
  app.add_flag("--rows", f.rows,
               "also time one RunPacked call of the batch over the engine's "
               "packed q|k|v rows [B*L, 3d] (mode rows; the chunked paths "
               "only, skipped on the others)");
  app.add_option("--out", f.out, "write the JSON report here");
  CLI11_PARSE(app, argc, argv);
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  return h3::bench::Run(f, command);
}
