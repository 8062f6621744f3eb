#include "engine/backend.h"

namespace h3::engine {

const char* WeightTypeName(WeightType type) {
  switch (type) {
    case WeightType::kFloat32:
      return "fp32";
    case WeightType::kFloat16:
      return "fp16";
    case WeightType::kBFloat16:
      return "bf16";
  }
  return "?";
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

}  // namespace h3::engine
