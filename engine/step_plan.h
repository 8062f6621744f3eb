#ifndef H3_ENGINE_STEP_PLAN_H_
#define H3_ENGINE_STEP_PLAN_H_

// What the engine loop's policy (the Scheduler, or an offline loop) asks of
// the Runner for one engine step, and what comes back. There is no prefill
// or decode "phase": a sequence's part of a step is some tokens fed at its
// position, a prompt chunk or the token it sampled last step alike.

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "engine/sequence_memory.h"
#include "kernels/sampling.h"

namespace h3::engine {

// One sequence's part of a step: `tokens` fed from the slot's position,
// then, if asked, the next token drawn from the last one's logits (with the
// slot's history supplying penalties and banned tokens, and counting the
// draw) and/or those logits returned to the host.
struct SequenceStep {
  SlotId slot = 0;
  // At least one id; the memory is the caller's and must stay valid until
  // Runner::Execute returns.
  absl::Span<const int32_t> tokens;
  bool sample = false;
  kernels::SamplingRow sampling;  // when `sample`
  bool logits = false;
};

// A step: each acquired slot at most once.
struct StepPlan {
  std::vector<SequenceStep> sequences;
};

// The rows a step of single tokens of `sequences` sequences runs as on a
// backend with graphs (Runner::Bucket): 1, 2, 4, 8, then multiples of 8 to
// 64, then of 32, so a few captured graphs serve every batch.
inline int64_t GraphBucket(int64_t sequences) {
  if (sequences <= 8) {
    int64_t bucket = 1;
    while (bucket < sequences) bucket *= 2;
    return bucket;
  }
  const int64_t step = sequences <= 64 ? 8 : 32;
  return (sequences + step - 1) / step * step;
}

struct StepResult {
  // Per plan entry, in plan order: the sampled id (-1 when not sampled) and
  // its log probability under the model's distribution (before penalties,
  // temperature and filters).
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  // The last token's logits of the entries that asked, [padded_vocab] each,
  // back to back in plan order; logits_row[i] is entry i's row or -1.
  std::vector<float> logits;
  std::vector<int> logits_row;
  int64_t padded_vocab = 0;

  // Entry i's logits; null when it did not ask for them.
  const float* LogitsOf(size_t i) const {
    return logits_row[i] < 0 ? nullptr
                             : logits.data() + logits_row[i] * padded_vocab;
  }
};

}  // namespace h3::engine

#endif  // H3_ENGINE_STEP_PLAN_H_
