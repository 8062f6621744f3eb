// The measured decode products' choices (engine/product_choices.h).
#include "engine/product_choices.h"

#include "absl/strings/str_cat.h"
#include "engine/step_plan.h"

namespace h3::engine {

const char* ProductKernelName(ProductKernel kernel) {
  switch (kernel) {
    case ProductKernel::kStream:
      return "stream";
    case ProductKernel::kSplit:
      return "stream-split";
    case ProductKernel::kTile:
      return "tile";
    default:
      return "cublaslt";
  }
}

int64_t ProductRowBucket(int64_t rows) { return GraphBucket(rows); }

ProductKey ProductKey::Of(const kernels::SkinnyGemmParams& p) {
  return {.bucket = ProductRowBucket(p.rows),
          .n = p.n,
          .k = p.k,
          .x_type = p.x_type,
          .w_type = p.w_type,
          .y_type = p.y_type,
          .bias_type = p.bias != nullptr ? p.bias_type : ElementType::kF32,
          .bias = p.bias != nullptr,
          .gelu = p.gelu};
}

const ProductKernel* ProductChoices::Find(const ProductKey& key) const {
  const auto it = choices_.find(key);
  return it == choices_.end() ? nullptr : &it->second.kernel;
}

ProductKernel ProductChoices::Choose(const ProductKey& key,
                                     const std::vector<KernelTime>& times) {
  ProductKernel best = ProductKernel::kCublasLt;
  float best_ms = -1.0f;
  for (const auto& [kernel, ms] : times) {
    if (ms >= 0 && (best_ms < 0 || ms < best_ms)) {
      best = kernel;
      best_ms = ms;
    }
  }
  if (choices_.size() < kMaxKeys) choices_[key] = {best, times};
  return best;
}

std::string ProductChoices::Describe() const {
  std::string out;
  for (const auto& [key, choice] : choices_) {
    absl::StrAppend(
        &out, "rows<=", key.bucket, " ", key.n, "x", key.k, " ",
        ElementTypeName(key.x_type), "/", ElementTypeName(key.w_type), "/",
        ElementTypeName(key.y_type), key.bias ? " bias" : "",
        key.gelu ? " gelu" : "", ": ", ProductKernelName(choice.kernel), " (");
    for (size_t i = 0; i < choice.times.size(); ++i) {
      const auto& [kernel, ms] = choice.times[i];
      absl::StrAppend(&out, i > 0 ? ", " : "", ProductKernelName(kernel), " ",
                      ms < 0 ? std::string("refused")
                             : absl::StrCat(absl::SixDigits(ms), " ms"));
    }
    absl::StrAppend(&out, ")\n");
  }
  return out;
}

}  // namespace h3::engine
