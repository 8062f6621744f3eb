#ifndef H3_MODELS_PERPLEXITY_H_
#define H3_MODELS_PERPLEXITY_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/runner.h"

// How well a model predicts held-out text: the default model's card and its
// test measure it here, against an n-gram baseline.
namespace h3::models {

// An interpolated Kneser-Ney trigram model over token ids with one absolute
// discount at every order; the unigram level continuation counts mixed with
// the uniform distribution, so every id has a probability.
class KneserNeyTrigram {
 public:
  // `stream`: training tokens, documents joined by an end-of-text id.
  KneserNeyTrigram(int32_t vocab_size, absl::Span<const int32_t> stream,
                   double discount = 0.75);

  // Natural log p(w | u v); u or v < 0 stands for "no such context".
  double LogProb(int32_t u, int32_t v, int32_t w) const;

 private:
  struct Context {         // counts of what follows a context
    int64_t total = 0;     // tokens (or, for bigram contexts, continuations)
    int64_t distinct = 0;  // distinct following ids
  };
  uint64_t Key(int32_t a, int32_t b) const { return uint64_t(a) * vocab_ + b; }

  double Bigram(int32_t v, int32_t w) const;
  double Unigram(int32_t w) const;

  int64_t vocab_;
  double discount_;
  std::unordered_map<uint64_t, int64_t> trigram_;      // c(u v w)
  std::unordered_map<uint64_t, Context> trigram_ctx_;  // (u v) -> c(u v .)
  std::unordered_map<uint64_t, int64_t> bigram_cont_;  // N1+(. v w)
  std::unordered_map<int64_t, Context> bigram_ctx_;    // v -> N1+(. v .)
  std::vector<int64_t> unigram_cont_;                  // N1+(. w)
  int64_t unigram_total_ = 0;                          // N1+(. .)
  int64_t unigram_distinct_ = 0;
};

// Mean negative log-likelihood (nats per token) of `stream[1:]`:
// the n-gram with its full two-token context.
double NgramLoss(const KneserNeyTrigram& ngram,
                 absl::Span<const int32_t> stream);

// The same for the engine's model, scored as training scored it: `stream`
// cut into consecutive windows of window + 1 tokens overlapping by one, each
// from a fresh state, every token after a window's first predicted. Runs
// as many windows at once as the runner has free slots, a token of each per
// step, with the logits of every step.
absl::StatusOr<double> ModelLoss(engine::Runner& runner,
                                 absl::Span<const int32_t> stream,
                                 int64_t window);

}  // namespace h3::models

#endif  // H3_MODELS_PERPLEXITY_H_
