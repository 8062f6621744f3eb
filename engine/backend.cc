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

absl::StatusOr<std::optional<WeightType>> ParseWeightType(
    const std::string& name) {
  if (name == "auto") return std::nullopt;
  for (WeightType type :
       {WeightType::kFloat32, WeightType::kFloat16, WeightType::kBFloat16}) {
    if (name == WeightTypeName(type)) return type;
  }
  return absl::InvalidArgumentError("unknown weight type \"" + name +
                                    "\"; use auto, fp32, fp16 or bf16");
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
