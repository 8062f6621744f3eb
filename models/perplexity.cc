#include "models/perplexity.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "base/status_macros.h"
#include "engine/sampler.h"

namespace h3::models {

KneserNeyTrigram::KneserNeyTrigram(int32_t vocab_size,
                                   absl::Span<const int32_t> stream,
                                   double discount)
    : vocab_(vocab_size), discount_(discount), unigram_cont_(vocab_size, 0) {
  for (size_t i = 2; i < stream.size(); ++i) {
    const uint64_t ctx = Key(stream[i - 2], stream[i - 1]);
    const uint64_t key = ctx * vocab_ + stream[i];
    Context& c = trigram_ctx_[ctx];
    ++c.total;
    if (trigram_[key]++ == 0) {
      ++c.distinct;
      // A new (u v w) is one more left context of (v w).
      const uint64_t vw = Key(stream[i - 1], stream[i]);
      Context& v = bigram_ctx_[stream[i - 1]];
      ++v.total;
      if (bigram_cont_[vw]++ == 0) {
        ++v.distinct;
        // A new (v w) is one more left context of w.
        ++unigram_total_;
        if (unigram_cont_[stream[i]]++ == 0) ++unigram_distinct_;
      }
    }
  }
}

double KneserNeyTrigram::Unigram(int32_t w) const {
  const double kept = std::max(double(unigram_cont_[w]) - discount_, 0.0) +
                      discount_ * double(unigram_distinct_) / double(vocab_);
  return unigram_total_ > 0 ? kept / double(unigram_total_)
                            : 1.0 / double(vocab_);
}

double KneserNeyTrigram::Bigram(int32_t v, int32_t w) const {
  const double lower = Unigram(w);
  if (v < 0) return lower;
  auto ctx = bigram_ctx_.find(v);
  if (ctx == bigram_ctx_.end()) return lower;
  auto it = bigram_cont_.find(Key(v, w));
  const double count = it == bigram_cont_.end() ? 0.0 : double(it->second);
  const double total = double(ctx->second.total);
  return (std::max(count - discount_, 0.0) +
          discount_ * double(ctx->second.distinct) * lower) /
         total;
}

double KneserNeyTrigram::LogProb(int32_t u, int32_t v, int32_t w) const {
  const double lower = Bigram(v, w);
  if (u < 0 || v < 0) return std::log(lower);
  auto ctx = trigram_ctx_.find(Key(u, v));
  if (ctx == trigram_ctx_.end()) return std::log(lower);
  auto it = trigram_.find(Key(u, v) * vocab_ + w);
  const double count = it == trigram_.end() ? 0.0 : double(it->second);
  const double total = double(ctx->second.total);
  return std::log((std::max(count - discount_, 0.0) +
                   discount_ * double(ctx->second.distinct) * lower) /
                  total);
}

double NgramLoss(const KneserNeyTrigram& ngram,
                 absl::Span<const int32_t> stream) {
  double sum = 0;
  for (size_t i = 1; i < stream.size(); ++i) {
    sum -= ngram.LogProb(i >= 2 ? stream[i - 2] : -1, stream[i - 1], stream[i]);
  }
  return stream.size() > 1 ? sum / double(stream.size() - 1) : 0.0;
}

absl::StatusOr<double> ModelLoss(engine::Runner& runner,
                                 absl::Span<const int32_t> stream,
                                 int64_t window) {
  engine::SequenceMemory& memory = runner.memory();
  const int64_t batch = memory.free_slots();
  if (batch < 1) return absl::ResourceExhaustedError("no free slot");
  const int64_t vocab = runner.model().config().vocab_size;
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + 1 < int64_t(stream.size()); s += window) {
    starts.push_back(s);
  }
  double sum = 0;
  int64_t count = 0;
  engine::StepPlan plan;
  engine::StepResult result;
  for (size_t first = 0; first < starts.size(); first += batch) {
    const size_t n = std::min<size_t>(batch, starts.size() - first);
    std::vector<engine::SlotId> slots;
    for (size_t j = 0; j < n; ++j) {
      H3_ASSIGN_OR_RETURN(engine::SlotId slot, memory.Acquire());
      slots.push_back(slot);
    }
    absl::Cleanup release = [&] {
      for (engine::SlotId slot : slots) memory.Release(slot);
    };
    // Window j predicts stream[start + 1 .. end); all step together until
    // the shortest is done, then the rest continue.
    std::vector<int64_t> ends(n);
    for (size_t j = 0; j < n; ++j) {
      ends[j] = std::min<int64_t>(starts[first + j] + window + 1,
                                  int64_t(stream.size()));
    }
    for (int64_t t = 0;; ++t) {
      plan.sequences.clear();
      std::vector<size_t> which;
      for (size_t j = 0; j < n; ++j) {
        const int64_t at = starts[first + j] + t;
        if (at + 1 < ends[j]) {
          plan.sequences.push_back({.slot = slots[j],
                                    .tokens = stream.subspan(at, 1),
                                    .logits = true});
          which.push_back(j);
        }
      }
      if (which.empty()) break;
      H3_RETURN_IF_ERROR(runner.Execute(plan, &result));
      for (size_t r = 0; r < which.size(); ++r) {
        const absl::Span<const float> row(result.LogitsOf(r), vocab);
        const int32_t next = stream[starts[first + which[r]] + t + 1];
        sum += engine::LogSumExp(row) - double(row[next]);
        ++count;
      }
    }
  }
  return count > 0 ? sum / double(count) : 0.0;
}

}  // namespace h3::models
