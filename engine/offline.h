#ifndef H3_ENGINE_OFFLINE_H_
#define H3_ENGINE_OFFLINE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/runner.h"
#include "engine/sampler.h"

namespace h3::engine {

// One request of an offline run (`h3 run`, the engine benchmarks).
struct OfflineRequest {
  std::vector<int32_t> prompt;  // at least one id
  SamplingParams sampling;      // validated by the caller
  uint64_t seed = 0;            // the random stream (sampling.seed ignored)
  int64_t max_new_tokens = 16;  // >= 0 (0: the prompt only)
  int32_t eos_id = -1;          // ends the request when sampled; -1: none
  // Ids from `listed` on are never sampled (a tokenizer with fewer tokens
  // than the model); -1: the whole vocabulary.
  int32_t listed = -1;
  bool prompt_logits = false;  // keep the logits at the last prompt token
};

struct OfflineResult {
  std::vector<int32_t> generated;  // the end-of-text id included
  bool eos = false;
  std::vector<float> prompt_logits;  // [padded_vocab] when asked for
};

struct OfflineStats {
  double prefill_seconds = 0;  // until every prompt of a wave is in
  double decode_seconds = 0;   // the single-token steps after
  int64_t prefill_steps = 0;
  int64_t decode_steps = 0;
  // Per prefill step, how many sequences it fed (a prompt split across
  // steps counts in each).
  std::vector<int> sequences_per_prefill_step;
};

// Runs every request to its end on `runner`, as a batch job: first all
// prompts, packed into steps of at most `step_tokens` tokens (whole prompts
// together while they fit, a longer one continued in the next step from its
// state), each sampling its request's first token; then steps of one token
// for every unfinished request, until each has max_new_tokens tokens or its
// end of text. Requests beyond the runner's free slots run in later waves.
// `on_token(request, id)`, if set, sees each token as it is sampled.
// InvalidArgument for a bad request (the runner's messages); the runner's
// errors. The slots it takes are given back.
absl::StatusOr<OfflineStats> GenerateOffline(
    Runner& runner, absl::Span<const OfflineRequest> requests,
    int64_t step_tokens, std::vector<OfflineResult>* results,
    const std::function<void(size_t, int32_t)>& on_token = nullptr);

}  // namespace h3::engine

#endif  // H3_ENGINE_OFFLINE_H_
