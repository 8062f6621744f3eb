#include "engine/backend.h"

#include <fstream>
#include <string>

namespace h3::engine {

absl::StatusOr<std::optional<ElementType>> ParseWeightType(
    const std::string& name) {
  if (name == "auto") return std::nullopt;
  for (ElementType type :
       {ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
    if (name == ElementTypeName(type)) return type;
  }
  return absl::InvalidArgumentError("unknown weight type \"" + name +
                                    "\"; use auto, fp32, fp16 or bf16");
}

absl::StatusOr<AttentionKernel> ParseAttentionKernel(const std::string& name) {
  if (name == "fma") return AttentionKernel::kFma;
  if (name == "flash") return AttentionKernel::kFlash;
  return absl::InvalidArgumentError("unknown attention kernel \"" + name +
                                    "\"; use fma or flash");
}

absl::StatusOr<int64_t> HostAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return absl::UnavailableError("MemAvailable is not in /proc/meminfo");
}

absl::Status Backend::BeginCapture() {
  return absl::UnimplementedError(name() + " has no graphs");
}
absl::StatusOr<int> Backend::EndCapture() {
  return absl::UnimplementedError(name() + " has no graphs");
}
absl::Status Backend::Replay(int) {
  return absl::UnimplementedError(name() + " has no graphs");
}

absl::Status Backend::EnableProfiler(bool on) {
  if (!on) {
    profiler_.reset();
    return absl::OkStatus();
  }
  if (profiler_ != nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<ProfileClock>> clock = MakeProfileClock();
  if (!clock.ok()) return clock.status();
  profiler_ = std::make_unique<Profiler>(*std::move(clock));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ProfileClock>> Backend::MakeProfileClock() {
  return MakeHostProfileClock();
}

}  // namespace h3::engine
