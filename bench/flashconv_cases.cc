// MeasureShape: the random layer, the buffers and the timed calls of
// h3_flashconv_bench.
#include "bench/flashconv_cases.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <string_view>

#include "bench/flashconv_calls.h"
#include "bench/flashconv_floor.h"
#include "kernels/h3.h"
#include "tests/support/random_h3_layer.h"

namespace h3::bench {

using kernels::H3PrefillCuda;
using kernels::H3PrefillCudaParams;
using kernels::H3PrefillPath;
using kernels::H3Shape;
using kernels::H3Weights;

const char* TypeName(ElementType type) { return ElementTypeName(type); }

std::optional<ElementType> ParseType(const std::string& name) {
  for (ElementType t :
       {ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
    if (name == TypeName(t)) return t;
  }
  return std::nullopt;
}

std::optional<Shape> ParseShape(const std::string& text) {
  const auto positive = [](std::string_view s, int* v) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && end == s.data() + s.size() && *v > 0;
  };
  const size_t x = text.find('x');
  Shape shape;
  if (x == std::string::npos ||
      !positive(std::string_view(text).substr(0, x), &shape.batch) ||
      !positive(std::string_view(text).substr(x + 1), &shape.heads)) {
    return std::nullopt;
  }
  return shape;
}

namespace {

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceMemory = std::unique_ptr<void, DeviceFree>;

DeviceMemory Allocate(int64_t bytes) {
  void* p = nullptr;
  H3_BENCH_CUDA_CHECK(cudaMalloc(&p, bytes));
  return DeviceMemory(p);
}

// A path's layer object, with its own output and states so that the paths
// never share memory. Without `op` the path is skipped (base.skipped says
// why) for the whole shape.
struct PathState {
  PathResult base;
  std::unique_ptr<H3PrefillCuda> op;
  DeviceMemory out, shift, diag;
};

// Whether `err` is an implementation declining (recorded; the case skipped)
// rather than failing (fatal). Clears the runtime's last error if so.
bool Declined(cudaError_t err, const char* call, std::string* why) {
  if (err != cudaErrorNotSupported && err != cudaErrorMemoryAllocation) {
    return false;
  }
  cudaGetLastError();
  *why = std::string(call) + " returned " + cudaGetErrorName(err) + " (" +
         cudaGetErrorString(err) + ")";
  return true;
}

class EventPair {
 public:
  EventPair() {
    H3_BENCH_CUDA_CHECK(cudaEventCreate(&start));
    H3_BENCH_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;

  // Milliseconds from start to stop, rounded to 10 ns (the events resolve
  // about 0.5 us). REQUIRES: both recorded and complete.
  double Ms() const {
    float ms = 0;
    H3_BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return std::round(ms * 1e5) / 1e5;
  }

  cudaEvent_t start = nullptr, stop = nullptr;
};

MaxDiff Diff(const void* a, const void* b, int64_t n, ElementType type,
             cudaStream_t stream) {
  MaxDiff diff;
  H3_BENCH_CUDA_CHECK(ComputeMaxDiff(a, b, n, type, stream, &diff));
  return diff;
}

// What the paths' calls share: q, k, v (channel-major, in the first mode's
// layout), the L2 flush, and mode rows' buffers (empty unless a path runs
// it): the q|k|v rows [B * L, 3d], filled from q, k, v once per case, and a
// tensor of q's size for its output transposed back to the first mode's
// layout.
struct Inputs {
  DeviceMemory qkv[3];
  DeviceMemory flush;
  DeviceMemory rows, rows_back;
};

// The memory of `ps`'s calls: its mode's inputs, its own output and states.
CallMemory MemoryOf(const PathState& ps, const Inputs& in, const Shape& shape,
                    ElementType type) {
  float* const shift = static_cast<float*>(ps.shift.get());
  float* const diag = static_cast<float*>(ps.diag.get());
  if (ps.base.mode == "rows") {
    return RowsMemory(shape, in.rows.get(), type, ps.out.get(), shift, diag);
  }
  return {in.qkv[0].get(), in.qkv[1].get(), in.qkv[2].get(),
          ps.out.get(),    shift,           diag};
}

// Enqueues one call in `mode` on `stream`. `segments`: those of modes packed
// and rows, built before the timed region.
cudaError_t Enqueue(H3PrefillCuda& op, const std::string& mode,
                    const Shape& shape, int64_t length, const StateBytes& sb,
                    const CallMemory& m, ElementType type,
                    const std::vector<kernels::H3PrefillSegment>& segments,
                    cudaStream_t stream) {
  if (mode == "batch") {
    return op.Run(BatchCall(shape, length, m, type), stream);
  }
  if (mode == "packed") {
    return op.RunPacked(PackedCall(shape, length, m, type, segments), stream);
  }
  if (mode == "rows") {
    return op.RunPacked(RowsCall(shape, m, type, segments), stream);
  }
  return RunSingles(op, shape, length, sb, m, type, stream);
}

// The guard's comparisons, after one call on every active path: mode packed
// against the same path's singles; every path other than cuFFT in the first
// mode, and every path in mode rows (its output first transposed back into
// in.rows_back), against cuFFT's first-mode call. The modes of one path
// follow each other in the same order on every path.
void CompareGuards(const Inputs& in, const std::vector<PathState>& paths,
                   const std::vector<bool>& active, const StateBytes& sb,
                   cudaStream_t stream, CaseResult* r) {
  const int64_t n = int64_t{r->shape.batch} * r->shape.heads * r->length;
  for (size_t i = 0; i + 1 < paths.size(); ++i) {
    const PathState &a = paths[i], &b = paths[i + 1];
    if (active[i] && active[i + 1] && a.base.mode == "packed" &&
        b.base.mode == "singles" && a.base.path == b.base.path) {
      r->paths[i].vs_singles =
          Diff(a.out.get(), b.out.get(), n, r->type, stream);
    }
  }
  const std::string& first = paths[0].base.mode;
  size_t cufft = paths.size();
  for (size_t i = 0; i < paths.size(); ++i) {
    if (active[i] && paths[i].base.mode == first &&
        paths[i].base.path == H3PrefillPath::kCufft) {
      cufft = i;
    }
  }
  for (size_t i = 0; cufft < paths.size() && i < paths.size(); ++i) {
    const PathState &a = paths[i], &b = paths[cufft];
    const bool rows = a.base.mode == "rows";
    if (i == cufft || !active[i] || (a.base.mode != first && !rows)) continue;
    const void* out = a.out.get();
    if (rows) {
      H3_BENCH_CUDA_CHECK(RowsToChannelMajor(r->shape, r->length, first, out,
                                             r->type, in.rows_back.get(),
                                             stream));
      out = in.rows_back.get();
    }
    PathResult& result = r->paths[i];
    result.out_vs_cufft = Diff(out, b.out.get(), n, r->type, stream);
    result.shift_vs_cufft = Diff(a.shift.get(), b.shift.get(), sb.shift / 4,
                                 ElementType::kF32, stream);
    result.diag_vs_cufft = Diff(a.diag.get(), b.diag.get(), sb.diag / 4,
                                ElementType::kF32, stream);
  }
}

// One case on every path that has a layer object. The buffers hold at least
// this case's tensors.
CaseResult MeasureCase(const Shape& shape, const CaseOptions& o, int64_t length,
                       ElementType type, const Inputs& in,
                       std::vector<PathState>& paths, const StateBytes& sb,
                       cudaStream_t stream) {
  CaseResult r{shape, o.d_state, length, type};
  std::vector<bool> active;
  for (const PathState& ps : paths) {
    r.paths.push_back(ps.base);
    active.push_back(ps.op != nullptr);
  }
  // Mode rows reads the first mode's values from the q|k|v rows (not timed).
  if (in.rows) {
    H3_BENCH_CUDA_CHECK(FillRows(shape, length, paths[0].base.mode,
                                 in.qkv[0].get(), in.qkv[1].get(),
                                 in.qkv[2].get(), type, in.rows.get(), stream));
  }
  // Zeroes path i's states and flushes L2 (not timed), then enqueues the
  // call, between the events of `timer` when given. A decline retires the
  // path for this case.
  const auto call = [&](size_t i, EventPair* timer) {
    PathState& ps = paths[i];
    H3_BENCH_CUDA_CHECK(cudaMemsetAsync(ps.shift.get(), 0, sb.shift, stream));
    H3_BENCH_CUDA_CHECK(cudaMemsetAsync(ps.diag.get(), 0, sb.diag, stream));
    if (in.flush) {
      H3_BENCH_CUDA_CHECK(
          cudaMemsetAsync(in.flush.get(), 0, o.l2_flush_bytes, stream));
    }
    const std::string& mode = ps.base.mode;
    const CallMemory memory = MemoryOf(ps, in, shape, type);
    std::vector<kernels::H3PrefillSegment> segments;
    if (mode == "packed" || mode == "rows") {
      const int64_t time = mode == "rows" ? 3 * int64_t{shape.heads} : 1;
      segments = Segments(shape, length, time, sb, memory);
    }
    if (timer) H3_BENCH_CUDA_CHECK(cudaEventRecord(timer->start, stream));
    const cudaError_t err = Enqueue(*ps.op, mode, shape, length, sb, memory,
                                    type, segments, stream);
    std::string why;
    if (Declined(err, "H3PrefillCuda::Run", &why)) {
      active[i] = false;
      r.paths[i].skipped = why;
      return;
    }
    CheckCuda(err, "H3PrefillCuda::Run(params, stream)", __FILE__, __LINE__);
    if (timer) H3_BENCH_CUDA_CHECK(cudaEventRecord(timer->stop, stream));
  };

  // The correctness guard: one call each, fused against cuFFT.
  for (size_t i = 0; i < paths.size(); ++i) {
    if (active[i]) call(i, nullptr);
  }
  H3_BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  CompareGuards(in, paths, active, sb, stream, &r);

  // Warm-up, whose fastest call sets the number of repetitions.
  std::vector<int> reps(paths.size(), 0);
  {
    std::vector<std::deque<EventPair>> warm;
    for (size_t i = 0; i < paths.size(); ++i) warm.emplace_back(o.warmup);
    for (int w = 0; w < o.warmup; ++w) {
      for (size_t i = 0; i < paths.size(); ++i) {
        if (active[i]) call(i, &warm[i][w]);
      }
    }
    H3_BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!active[i]) continue;
      double fastest = warm[i][0].Ms();
      for (const EventPair& t : warm[i]) fastest = std::min(fastest, t.Ms());
      reps[i] = RepsFor(fastest, o.min_time_ms, o.min_reps, o.max_reps);
    }
  }

  // The timed calls: the paths alternate call by call, everything enqueued
  // before one synchronisation (events created beforehand).
  std::vector<std::deque<EventPair>> timed;
  for (size_t i = 0; i < paths.size(); ++i) timed.emplace_back(reps[i]);
  const int most = *std::max_element(reps.begin(), reps.end());
  for (int rep = 0; rep < most; ++rep) {
    for (size_t i = 0; i < paths.size(); ++i) {
      if (active[i] && rep < reps[i]) call(i, &timed[i][rep]);
    }
  }
  H3_BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (size_t i = 0; i < paths.size(); ++i) {
    if (!active[i]) continue;
    for (const EventPair& t : timed[i]) r.paths[i].ms.push_back(t.Ms());
  }
  return r;
}

// Whether `op` takes mode rows' calls (H3PrefillCuda::RunsRows) in every
// type of `types`; if not, *why says why. RunsRows looks at the strides and
// at the tensors' alignment, not at their length, so one row of q|k|v and
// one of out from cudaMalloc (aligned as the case's buffers are) stand for
// the whole tensors.
bool TakesRows(const H3PrefillCuda& op, const Shape& shape,
               const std::vector<ElementType>& types, std::string* why) {
  int64_t element = 0;
  for (ElementType t : types) element = std::max(element, ElementSize(t));
  const DeviceMemory qkv_row = Allocate(3 * shape.heads * element);
  const DeviceMemory out_row = Allocate(shape.heads * element);
  const std::vector<kernels::H3PrefillSegment> none;
  for (ElementType type : types) {
    const CallMemory m =
        RowsMemory(shape, qkv_row.get(), type, out_row.get(), nullptr, nullptr);
    if (!op.RunsRows(RowsCall(shape, m, type, none))) {
      *why = std::string("H3PrefillCuda::RunsRows is false for ") +
             TypeName(type) + " on path " +
             kernels::H3PrefillPathName(op.path()) +
             ": only the chunked paths (chunked, chunked_mma) read packed "
             "rows, with d_model a multiple of 8";
      return false;
    }
  }
  return true;
}

// Every (path, mode), the modes of a path together.
std::vector<std::pair<H3PrefillPath, std::string>> PathModes(
    const std::vector<H3PrefillPath>& paths,
    const std::vector<std::string>& modes) {
  std::vector<std::pair<H3PrefillPath, std::string>> all;
  for (H3PrefillPath path : paths) {
    for (const std::string& mode : modes) all.emplace_back(path, mode);
  }
  return all;
}

void PrintProgress(const CaseResult& r) {
  std::fprintf(stderr, "h3_flashconv_bench: %dx%d L=%lld %s:", r.shape.batch,
               r.shape.heads, static_cast<long long>(r.length),
               TypeName(r.type));
  for (const PathResult& p : r.paths) {
    const std::string name = std::string(kernels::H3PrefillPathName(p.path)) +
                             (p.mode == "batch" ? "" : " " + p.mode);
    if (p.ms.empty()) {
      std::fprintf(stderr, " %s skipped;", name.c_str());
    } else {
      std::fprintf(stderr, " %s %.4f ms (median of %zu);", name.c_str(),
                   Summarize(p.ms).median, p.ms.size());
    }
  }
  std::fprintf(stderr, "\n");
}

}  // namespace

std::vector<CaseResult> MeasureShape(const Shape& shape, const CaseOptions& o,
                                     cudaStream_t stream) {
  const H3Shape s{.d_model = shape.heads, .head_dim = 1, .d_state = o.d_state};
  // The S4D-range random layer of the kernel tests (weights do not change
  // the work a call does).
  const h3::testing::RandomH3Layer layer(s, static_cast<uint32_t>(o.seed));
  std::vector<PathState> paths;
  int with_op = 0;
  bool rows = false;  // whether some path runs mode rows
  std::vector<std::string> modes =
      o.packed ? std::vector<std::string>{"packed", "singles"}
               : std::vector<std::string>{"batch"};
  if (o.rows) modes.push_back("rows");
  for (const auto& [path, mode] : PathModes(o.paths, modes)) {
    PathState& ps = paths.emplace_back();
    ps.base.path = path;
    ps.base.mode = mode;
    H3PrefillCuda::Options options;
    options.prefer = path;
    const cudaError_t err =
        H3PrefillCuda::Create(layer.weights(), options, &ps.op);
    if (err != cudaSuccess) {
      if (!Declined(err, "H3PrefillCuda::Create", &ps.base.skipped)) {
        CheckCuda(err, "H3PrefillCuda::Create(weights, options, &op)", __FILE__,
                  __LINE__);
      }
      continue;
    }
    ps.base.path_taken = kernels::H3PrefillPathName(ps.op->path());
    ps.base.reason = ps.op->reason();
    if (mode == "rows" &&
        !TakesRows(*ps.op, shape, o.types, &ps.base.skipped)) {
      ps.op.reset();
      continue;
    }
    rows = rows || mode == "rows";
    ++with_op;
  }

  // Our tensors, allocated once at the longest length that fits in the
  // budget; longer cases are skipped. Each path and mode that runs has its
  // out; q, k, v are shared, and so are mode rows' q|k|v rows (3 tensors)
  // and its transposed-back output (1).
  const int64_t batch = shape.batch, channels = shape.heads;
  const StateBytes sb{batch * channels * o.d_state * 4,
                      batch * channels * s.modes() * 8};
  int64_t element = 0;
  for (ElementType t : o.types) element = std::max(element, ElementSize(t));
  const int64_t tensors = 3 + with_op + (rows ? 4 : 0);
  const auto need = [&](int64_t length) {
    return tensors * batch * channels * length * element +
           with_op * (sb.shift + sb.diag) + o.l2_flush_bytes;
  };
  size_t free_bytes = 0, total_bytes = 0;
  H3_BENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double budget = o.memory_fraction * free_bytes;
  int64_t fit = 0;
  for (int64_t length : o.lengths) {
    if (with_op > 0 && need(length) <= budget) fit = length;
  }
  Inputs in;
  if (fit > 0) {
    if (o.l2_flush_bytes > 0) in.flush = Allocate(o.l2_flush_bytes);
    const int64_t tensor = batch * channels * fit * element;
    for (DeviceMemory& t : in.qkv) t = Allocate(tensor);
    if (rows) {
      in.rows = Allocate(3 * tensor);
      in.rows_back = Allocate(tensor);
    }
    for (PathState& ps : paths) {
      if (ps.op == nullptr) continue;
      ps.out = Allocate(tensor);
      ps.shift = Allocate(sb.shift);
      ps.diag = Allocate(sb.diag);
    }
  }

  std::vector<CaseResult> results;
  for (ElementType type : o.types) {
    for (int j = 0; j < 3 && fit > 0; ++j) {
      H3_BENCH_CUDA_CHECK(FillNormal(in.qkv[j].get(), batch * channels * fit,
                                     type, o.seed * 3 + j, stream));
    }
    for (int64_t length : o.lengths) {
      if (length <= fit) {
        results.push_back(
            MeasureCase(shape, o, length, type, in, paths, sb, stream));
      } else {
        CaseResult& r =
            results.emplace_back(CaseResult{shape, o.d_state, length, type});
        char why[200];
        std::snprintf(why, sizeof why,
                      "our tensors need %.2f GiB, over the budget of %.2f GiB "
                      "(--memory-fraction %.2f of %.2f GiB free)",
                      need(length) / 1073741824.0, budget / 1073741824.0,
                      o.memory_fraction, free_bytes / 1073741824.0);
        for (const PathState& ps : paths) {
          PathResult& p = r.paths.emplace_back(ps.base);
          if (ps.op != nullptr) p.skipped = why;
        }
      }
      PrintProgress(results.back());
    }
  }
  return results;
}

}  // namespace h3::bench
