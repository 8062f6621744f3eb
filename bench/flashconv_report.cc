// The device, bandwidth and case records of h3_flashconv_bench's report.
#include "bench/flashconv_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "bench/flashconv_floor.h"

namespace h3::bench {

using Json = nlohmann::ordered_json;
using kernels::H3PrefillPath;

namespace {

// FlashFFTConv's published H100 times for its gated convolution (a different
// operation: no shift SSM, no carried or end states) at B = 64, H = 768.
constexpr Shape kPublishedShape{64, 768};
constexpr struct {
  int64_t length;
  double ms;
} kPublished[] = {{256, 0.11},  {1024, 0.29},  {4096, 1.43},
                  {8192, 3.58}, {16384, 12.2}, {32768, 26.3}};

const double* PublishedMs(const CaseResult& r) {
  if (r.shape.batch != kPublishedShape.batch ||
      r.shape.heads != kPublishedShape.heads) {
    return nullptr;
  }
  for (const auto& p : kPublished) {
    if (p.length == r.length) return &p.ms;
  }
  return nullptr;
}

Json OrNull(const Json& value, bool known) { return known ? value : Json(); }

std::string CudaVersion(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// max|fused - cufft| / max|cufft|; null when undefined (NaN, or 0 / 0 is 0).
Json Normalised(const MaxDiff& d) {
  if (d.max_abs_ref == 0 && d.max_abs_diff == 0) return 0.0;
  const double r = static_cast<double>(d.max_abs_diff) / d.max_abs_ref;
  return std::isfinite(r) ? Json(r) : Json();
}

PrefillBytes BytesOf(const CaseResult& r) {
  return H3PrefillBytes(
      {.d_model = r.shape.heads, .head_dim = 1, .d_state = r.d_state},
      r.shape.batch, r.length, ElementSize(r.type));
}

// The median of (path, mode) in ms, or 0 where it did not run.
double MedianOf(const CaseResult& r, H3PrefillPath path,
                const std::string& mode) {
  for (const PathResult& p : r.paths) {
    if (p.path == path && p.mode == mode && !p.ms.empty()) {
      return Summarize(p.ms).median;
    }
  }
  return 0;
}

// The mode of the cuFFT calls that `p` is set beside: its own, or for mode
// rows (which the cuFFT path does not take) the first mode, whose values it
// reads.
const std::string& CufftMode(const CaseResult& r, const PathResult& p) {
  return p.mode == "rows" ? r.paths.front().mode : p.mode;
}

// "   0.1234" or "        -" for a path that did not run.
std::string Cell(const CaseResult& r, H3PrefillPath path,
                 const std::string& mode, double* median) {
  char text[32] = "        -";
  *median = 0;
  for (const PathResult& p : r.paths) {
    if (p.path == path && p.mode == mode && !p.ms.empty()) {
      *median = Summarize(p.ms).median;
      std::snprintf(text, sizeof text, "%9.4f", *median);
    }
  }
  return text;
}

// Where the guard's diffs against cuFFT for `p` are kept: in `p` itself for
// mode rows, else in the same path's first-mode result.
const PathResult* GuardOf(const CaseResult& r, const PathResult& p) {
  if (p.mode == "rows") return &p;
  for (const PathResult& q : r.paths) {
    if (q.path == p.path && q.mode == r.paths.front().mode) return &q;
  }
  return nullptr;
}

// "channel_major [B, d, L]" and the like: the tensors' layout in `mode`.
const char* LayoutOf(const std::string& mode) {
  if (mode == "batch") return "channel_major [B, d, L]";
  if (mode == "rows") return "packed rows: q|k|v [B * L, 3d], out [B * L, d]";
  return "packed channel_major [d, B * L]";
}

// One row of the table: a path's calls in its mode beside cuFFT's.
void PrintRow(const CaseResult& r, const PathResult& p, const Bandwidth& bw) {
  double ours = 0, cufft = 0;
  const std::string a = Cell(r, p.path, p.mode, &ours);
  const std::string b = Cell(r, H3PrefillPath::kCufft, CufftMode(r, p), &cufft);
  const double floor_ms = BytesOf(r).floor() / bw.measured * 1e3;
  const std::string shape =
      std::to_string(r.shape.batch) + "x" + std::to_string(r.shape.heads);
  char speedup[16] = "      -", of_floor[16] = "      -",
       diff[16] = "        -";
  if (ours > 0 && cufft > 0 && p.path != H3PrefillPath::kCufft) {
    std::snprintf(speedup, sizeof speedup, "%7.2f", cufft / ours);
  }
  if (ours > 0) {
    std::snprintf(of_floor, sizeof of_floor, "%6.1f%%", 100 * floor_ms / ours);
  }
  const PathResult* guard = GuardOf(r, p);
  if ((p.mode == r.paths.front().mode || p.mode == "rows") &&
      guard != nullptr && guard->out_vs_cufft &&
      guard->out_vs_cufft->max_abs_ref > 0) {
    std::snprintf(
        diff, sizeof diff, "%9.2e",
        guard->out_vs_cufft->max_abs_diff / guard->out_vs_cufft->max_abs_ref);
  }
  std::printf("%-8s %6lld %4s %-7s %-7s %s %s %s %9.4f %s %s\n", shape.c_str(),
              static_cast<long long>(r.length), TypeName(r.type),
              p.mode.c_str(), kernels::H3PrefillPathName(p.path), a.c_str(),
              b.c_str(), speedup, floor_ms, of_floor, diff);
}

}  // namespace

Bandwidth MeasureBandwidth(int device, int64_t want, cudaStream_t stream) {
  Bandwidth bw;
  size_t free_bytes = 0, total_bytes = 0;
  H3_BENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  bw.copy_bytes = std::min<int64_t>(want, free_bytes / 4) / 256 * 256;
  void *src = nullptr, *dst = nullptr;
  H3_BENCH_CUDA_CHECK(cudaMalloc(&src, bw.copy_bytes));
  H3_BENCH_CUDA_CHECK(cudaMalloc(&dst, bw.copy_bytes));
  H3_BENCH_CUDA_CHECK(cudaMemsetAsync(src, 1, bw.copy_bytes, stream));
  cudaEvent_t start, stop;
  H3_BENCH_CUDA_CHECK(cudaEventCreate(&start));
  H3_BENCH_CUDA_CHECK(cudaEventCreate(&stop));
  for (int rep = -2; rep < 20; ++rep) {
    H3_BENCH_CUDA_CHECK(cudaEventRecord(start, stream));
    H3_BENCH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bw.copy_bytes,
                                        cudaMemcpyDeviceToDevice, stream));
    H3_BENCH_CUDA_CHECK(cudaEventRecord(stop, stream));
    H3_BENCH_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    H3_BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (rep >= 0) bw.copy_ms.push_back(std::round(ms * 1e5) / 1e5);  // 10 ns
  }
  H3_BENCH_CUDA_CHECK(cudaEventDestroy(start));
  H3_BENCH_CUDA_CHECK(cudaEventDestroy(stop));
  H3_BENCH_CUDA_CHECK(cudaFree(src));
  H3_BENCH_CUDA_CHECK(cudaFree(dst));
  bw.measured = 2.0 * bw.copy_bytes / (Summarize(bw.copy_ms).min * 1e-3);
  for (auto [attr, value] :
       {std::pair{cudaDevAttrMemoryClockRate, &bw.memory_clock_khz},
        std::pair{cudaDevAttrGlobalMemoryBusWidth, &bw.bus_width_bits}}) {
    if (cudaDeviceGetAttribute(value, attr, device) != cudaSuccess) {
      cudaGetLastError();
      *value = 0;
    }
  }
  bw.peak = PeakBandwidth(bw.memory_clock_khz, bw.bus_width_bits);
  return bw;
}

Json BandwidthJson(const Bandwidth& bw) {
  const bool peak = bw.peak > 0;
  return {
      {"measured_gb_per_s", bw.measured / 1e9},
      {"measured_method",
       "bytes read + written / time of the fastest of 20 device-to-device "
       "cudaMemcpyAsync of copy_bytes (after 2 untimed)"},
      {"copy_bytes", bw.copy_bytes},
      {"copy_ms", bw.copy_ms},
      {"peak_gb_per_s", OrNull(bw.peak / 1e9, peak)},
      {"memory_clock_khz", OrNull(bw.memory_clock_khz, peak)},
      {"bus_width_bits", OrNull(bw.bus_width_bits, peak)},
      {"peak_method",
       peak ? "2 x cudaDevAttrMemoryClockRate x cudaDevAttrGlobalMemoryBusWidth"
              " / 8"
            : "unknown: the runtime did not report cudaDevAttrMemoryClockRate "
              "and cudaDevAttrGlobalMemoryBusWidth"}};
}

Json DeviceJson(int device) {
  cudaDeviceProp prop{};
  H3_BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  H3_BENCH_CUDA_CHECK(cudaDriverGetVersion(&driver));
  H3_BENCH_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  std::ifstream file("/proc/driver/nvidia/version");
  std::string nvidia;
  std::getline(file, nvidia);
  return {{"index", device},
          {"name", prop.name},
          {"compute_capability",
           std::to_string(prop.major) + "." + std::to_string(prop.minor)},
          {"sm_count", prop.multiProcessorCount},
          {"memory_bytes", prop.totalGlobalMem},
          {"l2_cache_bytes", prop.l2CacheSize},
          {"driver", nvidia.empty() ? Json() : Json(nvidia)},
          {"driver_cuda_version", CudaVersion(driver)},
          {"runtime_version", CudaVersion(runtime)}};
}

Json CaseJson(const CaseResult& r, const PathResult& p, const Bandwidth& bw) {
  const PrefillBytes b = BytesOf(r);
  const double floor_measured = b.floor() / bw.measured * 1e3;
  const double floor_peak = bw.peak > 0 ? b.floor() / bw.peak * 1e3 : 0;
  Json j = {{"batch", r.shape.batch},
            {"heads", r.shape.heads},
            {"d_model", r.shape.heads},
            {"head_dim", 1},
            {"d_state", r.d_state},
            {"length", r.length},
            {"type", TypeName(r.type)},
            {"layout", LayoutOf(p.mode)},
            {"mode", p.mode},
            {"path", kernels::H3PrefillPathName(p.path)},
            {"path_taken", p.path_taken.empty() ? Json() : Json(p.path_taken)},
            {"path_reason", p.reason},
            {"bytes",
             {{"activations", b.activations},
              {"states", b.states},
              {"floor", b.floor()},
              {"weights", b.weights},
              {"kernel_spectrum", b.kernel_spectrum}}},
            {"floor_ms",
             {{"measured_bandwidth", floor_measured},
              {"peak_bandwidth", OrNull(floor_peak, bw.peak > 0)}}}};
  if (p.ms.empty()) {
    j["skipped"] = p.skipped.empty() ? "not run" : p.skipped;
    return j;
  }
  const TimeStats t = Summarize(p.ms);
  j["reps"] = p.ms.size();
  j["ms"] = {{"median", t.median}, {"min", t.min}, {"p90", t.p90}};
  j["fraction_of_floor"] = {
      {"measured_bandwidth", floor_measured / t.median},
      {"peak_bandwidth", OrNull(floor_peak / t.median, bw.peak > 0)}};
  if (p.mode == "packed") {
    const double singles = MedianOf(r, p.path, "singles");
    j["speedup_vs_singles"] = singles > 0 ? Json(singles / t.median) : Json();
    // 0 when the packed call equals the calls one by one, as it should.
    j["max_abs_diff_vs_singles"] =
        p.vs_singles ? Json(p.vs_singles->max_abs_diff) : Json();
  }
  if (p.path != H3PrefillPath::kCufft) {
    const double cufft = MedianOf(r, H3PrefillPath::kCufft, CufftMode(r, p));
    j["speedup_vs_cufft"] = cufft > 0 ? Json(cufft / t.median) : Json();
    const PathResult* g = GuardOf(r, p);
    auto diff = [&](const std::optional<MaxDiff> PathResult::*field) {
      return g != nullptr && g->*field ? Normalised(*(g->*field)) : Json();
    };
    j["diff_vs_cufft"] = diff(&PathResult::out_vs_cufft);
    j["state_diff_vs_cufft"] = {{"shift", diff(&PathResult::shift_vs_cufft)},
                                {"diag", diff(&PathResult::diag_vs_cufft)}};
  }
  if (const double* published = PublishedMs(r)) {
    j["flashfftconv_published_ms"] = *published;
    j["ms_over_flashfftconv_published"] = t.median / *published;
  }
  j["ms_all"] = p.ms;
  return j;
}

Json ReferenceJson() {
  Json lengths = Json::array(), ms = Json::array();
  for (const auto& p : kPublished) {
    lengths.push_back(p.length);
    ms.push_back(p.ms);
  }
  return {{"label",
           "PUBLISHED numbers of a DIFFERENT operation, not measured here: "
           "FlashFFTConv's gated long convolution alone; ours is the whole "
           "H3 inner op (shift convolution, gating, the diagonal SSM's "
           "convolution and its carried state, both end states)"},
          {"source", "FlashFFTConv (Fu et al., 2023), H100"},
          {"batch", kPublishedShape.batch},
          {"heads", kPublishedShape.heads},
          {"lengths", lengths},
          {"ms", ms},
          {"ratio_in_cases",
           "ms_over_flashfftconv_published = our median / published, for "
           "the cases with this batch, heads and length (either type)"}};
}

void PrintTable(const std::vector<CaseResult>& cases, const Bandwidth& bw) {
  std::printf("medians in ms; floor at the measured %.0f GB/s\n",
              bw.measured / 1e9);
  std::printf("%-8s %6s %4s %-7s %-7s %9s %9s %7s %9s %7s %9s\n", "shape", "L",
              "type", "mode", "path", "ms", "cufft", "speedup", "floor",
              "floor/ms", "diff");
  for (const CaseResult& r : cases) {
    // A row per path and mode beside cuFFT; cuFFT's own rows only when it
    // ran alone.
    bool others = false;
    for (const PathResult& p : r.paths) {
      others = others || p.path != H3PrefillPath::kCufft;
    }
    for (const PathResult& p : r.paths) {
      if (!others || p.path != H3PrefillPath::kCufft) PrintRow(r, p, bw);
    }
  }
}

}  // namespace h3::bench
