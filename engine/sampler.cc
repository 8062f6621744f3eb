#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

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

absl::StatusOr<Sampler> Sampler::Create(const SamplingParams& params,
                                        int32_t vocab_size,
                                        absl::Span<const int32_t> prompt) {
  if (absl::Status s = ValidateSamplingParams(params); !s.ok()) return s;
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError("the vocabulary is empty");
  }
  const uint64_t seed =
      params.seed.has_value()
          ? *params.seed
          : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  Sampler sampler(params, vocab_size, seed);
  if (params.repetition_penalty != 1.0f) {
    sampler.prompt_tokens_.insert(prompt.begin(), prompt.end());
  }
  return sampler;
}

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size,
                 uint64_t seed)
    : params_(params), vocab_size_(vocab_size), rng_(seed) {}

void Sampler::Accept(int32_t id) { ++counts_[id]; }

SampledToken Sampler::Sample(absl::Span<const float> logits, int logprobs,
                             absl::Span<const int32_t> banned) {
  work_.assign(logits.begin(), logits.begin() + vocab_size_);
  Penalize();
  for (int32_t id : banned) {
    if (id >= 0 && id < vocab_size_) {
      work_[id] = -std::numeric_limits<float>::infinity();
    }
  }
  SampledToken token;
  token.id = params_.temperature == 0.0f ? Greedy() : Draw();
  if (logprobs >= 0) {
    Logprobs(logits, logprobs, &token);
  }
  Accept(token.id);
  return token;
}

void Sampler::Penalize() {
  const float rp = params_.repetition_penalty;
  auto repeat = [&](int32_t id) {
    if (id < 0 || id >= vocab_size_) return;
    float& x = work_[id];
    x = x > 0 ? x / rp : x * rp;
  };
  if (rp != 1.0f) {
    for (int32_t id : prompt_tokens_) repeat(id);
    for (const auto& [id, count] : counts_) {
      if (!prompt_tokens_.contains(id)) repeat(id);
    }
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    for (const auto& [id, count] : counts_) {
      if (id < 0 || id >= vocab_size_) continue;
      work_[id] -= params_.presence_penalty +
                   params_.frequency_penalty * static_cast<float>(count);
    }
  }
}

int32_t Sampler::Greedy() const {
  // The first maximum: the lowest id among equals.
  return static_cast<int32_t>(std::max_element(work_.begin(), work_.end()) -
                              work_.begin());
}

int32_t Sampler::Draw() {
  const MoreLikely more{work_.data()};
  order_.resize(vocab_size_);
  std::iota(order_.begin(), order_.end(), 0);
  const bool truncate_k = params_.top_k > 0 && params_.top_k < vocab_size_;
  if (truncate_k) {
    std::nth_element(order_.begin(), order_.begin() + params_.top_k,
                     order_.end(), more);
    order_.resize(params_.top_k);
  }
  const bool sorted = truncate_k || params_.top_p < 1.0f;
  if (sorted) std::sort(order_.begin(), order_.end(), more);

  const float max_logit =
      sorted ? work_[order_[0]] : *std::max_element(work_.begin(), work_.end());
  const double inv_t = 1.0 / params_.temperature;
  probs_.resize(order_.size());
  double total = 0;
  for (size_t i = 0; i < order_.size(); ++i) {
    probs_[i] = std::exp((work_[order_[i]] - max_logit) * inv_t);
    total += probs_[i];
  }
  size_t kept = order_.size();
  if (params_.top_p < 1.0f) {
    // The smallest prefix (most likely first) whose mass reaches top_p.
    const double target = params_.top_p * total;
    double mass = 0;
    for (size_t i = 0; i < kept; ++i) {
      mass += probs_[i];
      if (mass >= target) {
        kept = i + 1;
        break;
      }
    }
  }
  // min_p is relative to the most likely token, whose weight here is 1.
  const double floor = params_.min_p;
  total = 0;
  for (size_t i = 0; i < kept; ++i) {
    if (probs_[i] < floor) probs_[i] = 0;
    total += probs_[i];
  }
  double u = Uniform() * total;
  size_t last = 0;
  for (size_t i = 0; i < kept; ++i) {
    if (probs_[i] == 0) continue;
    last = i;
    if (u < probs_[i]) return order_[i];
    u -= probs_[i];
  }
  return order_[last];  // rounding left u just above the total
}

double Sampler::Uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

double LogSumExp(absl::Span<const float> x) {
  const float max = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (float v : x) sum += std::exp(v - max);
  return max + std::log(sum);
}

void Sampler::Logprobs(absl::Span<const float> logits, int n,
                       SampledToken* out) {
  const float* x = logits.data();
  const double log_z = LogSumExp(logits.first(vocab_size_));
  out->logprob = static_cast<float>(x[out->id] - log_z);
  out->top.clear();
  if (n <= 0) return;
  n = std::min(n, vocab_size_);
  order_.resize(vocab_size_);
  std::iota(order_.begin(), order_.end(), 0);
  std::partial_sort(order_.begin(), order_.begin() + n, order_.end(),
                    MoreLikely{x});
  for (int i = 0; i < n; ++i) {
    out->top.push_back({order_[i], static_cast<float>(x[order_[i]] - log_z)});
  }
}

}  // namespace h3::engine
