#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace h3::engine {
namespace {

absl::Status OutOfRange(const char* field, double value, const char* range) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", value, "; it must be in ", range));
}

// Orders candidates: larger logit first, then lower id, so that every
// ordering (and so every result) is deterministic.
struct MoreLikely {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  // Written so that NaN fails every check.
  if (!(p.temperature >= 0 && p.temperature <= 100)) {
    return OutOfRange("temperature", p.temperature, "[0, 100]");
  }
  if (p.top_k < 0) return OutOfRange("top_k", p.top_k, "[0, vocabulary]");
  if (!(p.top_p > 0 && p.top_p <= 1)) {
    return OutOfRange("top_p", p.top_p, "(0, 1]");
  }
  if (!(p.min_p >= 0 && p.min_p <= 1)) {
    return OutOfRange("min_p", p.min_p, "[0, 1]");
  }
  if (!(p.repetition_penalty > 0 && p.repetition_penalty <= 10)) {
    return OutOfRange("repetition_penalty", p.repetition_penalty, "(0, 10]");
  }
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2)) {
    return OutOfRange("presence_penalty", p.presence_penalty, "[-2, 2]");
  }
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2)) {
    return OutOfRange("frequency_penalty", p.frequency_penalty, "[-2, 2]");
  }
  return absl::OkStatus();
}

kernels::SamplingRow SamplingRowOf(const SamplingParams& params, uint64_t seed,
                                   uint64_t step) {
  return {.temperature = params.temperature,
          .top_k = params.top_k,
          .top_p = params.top_p,
          .min_p = params.min_p,
          .repetition_penalty = params.repetition_penalty,
          .presence_penalty = params.presence_penalty,
          .frequency_penalty = params.frequency_penalty,
          .seed = seed,
          .step = step};
}

std::vector<uint8_t> RequestTokenFlags(int64_t vocab_size, int32_t listed,
                                       absl::Span<const int32_t> prompt,
                                       absl::Span<const int32_t> held) {
  std::vector<uint8_t> flags(vocab_size, 0);
  for (int32_t id : prompt) flags[id] |= kernels::kTokenInPrompt;
  for (int64_t id = listed; id < vocab_size; ++id) {
    flags[id] |= kernels::kTokenBanned;
  }
  for (int32_t id : held) flags[id] |= kernels::kTokenBanned;
  return flags;
}

void ReleaseHeldTokens(absl::Span<const int32_t> held, int32_t listed,
                       std::vector<uint8_t>& flags) {
  for (int32_t id : held) {
    if (id < listed) flags[id] &= ~kernels::kTokenBanned;
  }
}

uint64_t RandomSeed() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}

double LogSumExp(absl::Span<const float> x) {
  const float max = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (float v : x) sum += std::exp(v - max);
  return max + std::log(sum);
}

std::vector<TokenLogprob> TopLogprobs(absl::Span<const float> logits,
                                      int32_t vocab_size, int32_t listed,
                                      int n) {
  const double log_z = LogSumExp(logits.first(vocab_size));
  n = std::min(n, listed);
  if (n <= 0) return {};
  std::vector<int32_t> order(listed);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    MoreLikely{logits.data()});
  std::vector<TokenLogprob> top;
  for (int i = 0; i < n; ++i) {
    top.push_back({order[i], static_cast<float>(logits[order[i]] - log_z)});
  }
  return top;
}

}  // namespace h3::engine
