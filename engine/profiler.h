#ifndef H3_ENGINE_PROFILER_H_
#define H3_ENGINE_PROFILER_H_

// Per-operation timing of a backend's work: named ranges around the model's
// operations (engine/model_forward.cc, engine/runner.cc), each timed by the
// backend's own clock (ProfileClock: steady_clock on the CPU, CUDA events on
// the stream), and summed per (layer type, name). Off unless
// Backend::EnableProfiler(true); while off, Backend::profiler() is null and
// a ProfileRange costs one pointer test (no clock, no event, no sync).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace h3::engine {

// Time marks of one backend, taken in the order its work runs. Not
// thread-safe; driven by one Profiler.
class ProfileClock {
 public:
  virtual ~ProfileClock() = default;
  // Appends a mark taken when the work enqueued before it has run (now, on
  // the CPU, where ops run on the calling thread; a recorded event on a
  // GPU's stream). Must not be called while a graph is being captured.
  virtual absl::Status Mark() = 0;
  // Waits for every mark since the last Read, returns each one's time in ms
  // after the first of them, and forgets them.
  virtual absl::StatusOr<std::vector<double>> Read() = 0;
};

// One aggregate of Profiler::Totals.
struct OpTotal {
  std::string layer_type;  // "h3", "attention", or "model" (outside layers)
  std::string name;        // "qkv_linear"; nested: "h3_prefill/conv"
  int64_t calls = 0;
  double ms = 0;  // self time: the range's, less its nested ranges'
};

// Ranges are opened and closed in stack order; a range opened inside another
// is nested (reported as "outer/inner") and its time is not counted in the
// outer one's, so the totals never count time twice. Not thread-safe.
class Profiler {
 public:
  explicit Profiler(std::unique_ptr<ProfileClock> clock);

  // Opens a range. `name` and `layer_type` must outlive the profiler
  // (string literals); a nested range takes its outer range's layer type.
  void Begin(const char* name, const char* layer_type = "model");
  void End();
  // Ranges open now (0 between operations).
  int depth() const { return static_cast<int>(open_.size()); }

  // Waits for the work of the ranges closed since the last Collect and adds
  // their times to the totals. The first clock error since the last Collect,
  // if any (the totals then miss those ranges). FailedPrecondition while a
  // range is open.
  absl::Status Collect();
  // In the order each (layer type, name) was first seen.
  const std::vector<OpTotal>& Totals() const { return totals_; }
  void ClearTotals() { totals_.clear(); }

 private:
  struct Range {
    const char* name;
    const char* layer_type;
    int parent;  // index in ranges_, -1 at the top
    int begin_mark, end_mark;
  };

  void Mark();

  std::unique_ptr<ProfileClock> clock_;
  absl::Status error_;
  int marks_ = 0;
  std::vector<Range> ranges_;  // since the last Collect
  std::vector<int> open_;      // indices in ranges_
  std::vector<OpTotal> totals_;
};

// Times the enclosing scope as one range of `profiler`; nothing when it is
// null (the profiler is off).
class ProfileRange {
 public:
  ProfileRange(Profiler* profiler, const char* name,
               const char* layer_type = "model")
      : profiler_(profiler) {
    if (profiler_ != nullptr) profiler_->Begin(name, layer_type);
  }
  ~ProfileRange() {
    if (profiler_ != nullptr) profiler_->End();
  }
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;

 private:
  Profiler* profiler_;
};

// `op()` (returning absl::Status) inside a range of `profiler`, if any.
template <typename Op>
absl::Status TimeOp(Profiler* profiler, const char* name,
                    const char* layer_type, Op&& op) {
  ProfileRange range(profiler, name, layer_type);
  return op();
}

// steady_clock marks: for backends whose ops have finished when they return.
std::unique_ptr<ProfileClock> MakeHostProfileClock();

}  // namespace h3::engine

#endif  // H3_ENGINE_PROFILER_H_
