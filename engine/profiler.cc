#include "engine/profiler.h"

#include <chrono>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace h3::engine {

Profiler::Profiler(std::unique_ptr<ProfileClock> clock)
    : clock_(std::move(clock)) {}

void Profiler::Mark() {
  if (!error_.ok()) return;
  error_ = clock_->Mark();
  if (error_.ok()) ++marks_;
}

void Profiler::Begin(const char* name, const char* layer_type) {
  const int parent = open_.empty() ? -1 : open_.back();
  if (parent >= 0) layer_type = ranges_[parent].layer_type;
  Mark();
  ranges_.push_back({name, layer_type, parent, marks_ - 1, -1});
  open_.push_back(static_cast<int>(ranges_.size()) - 1);
}

void Profiler::End() {
  if (open_.empty()) return;
  Mark();
  ranges_[open_.back()].end_mark = marks_ - 1;
  open_.pop_back();
}

absl::Status Profiler::Collect() {
  if (!open_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "profiler: range \"", ranges_[open_.back()].name, "\" is still open"));
  }
  std::vector<Range> ranges = std::move(ranges_);
  ranges_.clear();
  const int marks = std::exchange(marks_, 0);
  absl::Status error = std::exchange(error_, absl::OkStatus());
  std::vector<double> times;
  if (marks > 0) {
    absl::StatusOr<std::vector<double>> read = clock_->Read();
    if (error.ok()) error = read.status();
    if (read.ok()) times = *std::move(read);
  }
  if (!error.ok()) return error;
  if (static_cast<int>(times.size()) != marks) {
    return absl::InternalError(absl::StrCat(
        "profiler: ", marks, " marks taken, ", times.size(), " read back"));
  }
  // Self time: each range's time less its direct children's.
  std::vector<double> self(ranges.size());
  std::vector<std::string> paths(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    const double ms = times[r.end_mark] - times[r.begin_mark];
    self[i] += ms;
    paths[i] = r.parent < 0 ? std::string(r.name)
                            : absl::StrCat(paths[r.parent], "/", r.name);
    if (r.parent >= 0) self[r.parent] -= ms;
  }
  absl::flat_hash_map<std::string, size_t> index;
  for (size_t i = 0; i < totals_.size(); ++i) {
    index[absl::StrCat(totals_[i].layer_type, " ", totals_[i].name)] = i;
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    const std::string key = absl::StrCat(ranges[i].layer_type, " ", paths[i]);
    auto [it, added] = index.try_emplace(key, totals_.size());
    if (added) totals_.push_back({ranges[i].layer_type, paths[i]});
    OpTotal& total = totals_[it->second];
    ++total.calls;
    total.ms += self[i];
  }
  return absl::OkStatus();
}

namespace {

class HostProfileClock final : public ProfileClock {
 public:
  absl::Status Mark() override {
    marks_.push_back(std::chrono::steady_clock::now());
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> Read() override {
    std::vector<double> ms;
    ms.reserve(marks_.size());
    for (const auto& t : marks_) {
      ms.push_back(
          std::chrono::duration<double, std::milli>(t - marks_[0]).count());
    }
    marks_.clear();
    return ms;
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<ProfileClock> MakeHostProfileClock() {
  return std::make_unique<HostProfileClock>();
}

}  // namespace h3::engine
