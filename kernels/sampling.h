#ifndef H3_KERNELS_SAMPLING_H_
#define H3_KERNELS_SAMPLING_H_

// Token sampling for a batch of sequences from their logits, on the device
// that computed them, so that only token ids travel back to the host. The
// CPU function is the specification; the CUDA kernel (kernels/cuda/
// sampling.h) takes the same Params and, for the same logits, chooses the
// same ids (up to fp32 rounding at a filter's boundary).
//
// For each row b, over the candidates [0, vocab_size), with h the row's
// TokenHistory (counts and flags 0 without one):
//   1. penalties: if repetition_penalty != 1, every token flagged
//      kTokenInPrompt or generated before (h.counts > 0) has a positive
//      logit divided by it and a negative one multiplied by it; then
//      l -= presence_penalty * (count > 0) + frequency_penalty * count
//      (count: times generated). Tokens flagged kTokenBanned are not
//      candidates at all: never kept by a filter, never chosen.
//   2. temperature 0: the id of the largest value (ties: the lowest id).
//      Otherwise l /= temperature and:
//   3. top_k > 0 keeps the k largest (ties at the boundary: lower ids).
//   4. p = softmax over the kept tokens (each token's weight exp(l - max l)
//      rounded to float: TokenWeight in kernels/sampling_token.h);
//      top_p < 1 keeps the smallest set of most likely tokens (ties: lower
//      ids first) whose p sums to >= top_p.
//   5. min_p > 0 drops tokens with p < min_p * max p.
//   6. the draw: u = PhiloxUniform(seed, step) in [0, 1)
//      (kernels/philox.h); walking the kept
//      tokens in id order, the first whose running sum of p exceeds
//      u * (sum of kept p); the last kept token if rounding leaves none.
//   7. h.counts[id] += 1 (with a history): the sampler keeps the counts
//      of step 1, so that a decode step, sampling included, can be
//      replayed as one graph.
// logprobs[b] (if not null) = log softmax of the unmodified logits at the
// chosen id.
// REQUIRES: no NaN, a finite largest processed logit, and at least one
// token of each row not banned. Parameters outside the ranges
// ValidateSamplingParams (engine/sampler.h) allows still give an id in
// [0, vocab_size): temperature <= 0 is greedy, top_k outside (0, vocab_size)
// and top_p >= 1 keep all; if min_p > 1 leaves no token, the largest
// processed logit's.

#include <cstdint>

namespace h3::kernels {

struct SamplingRow {
  float temperature = 1.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: all
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  uint64_t step = 0;  // the draw's counter: one per sampled token
};

// Bits of TokenHistory::flags.
inline constexpr uint8_t kTokenInPrompt = 1;  // the repetition penalty's
inline constexpr uint8_t kTokenBanned = 2;    // e.g. end of text, too early

// One sequence's tokens so far, in the sampler's memory.
struct TokenHistory {
  int32_t* counts = nullptr;  // [vocab_size] times each token was generated
  uint8_t* flags = nullptr;   // [vocab_size] kTokenInPrompt | kTokenBanned
};

struct SampleParams {
  int batch = 0;
  int32_t vocab_size = 0;  // candidates [0, vocab_size)
  int64_t row_stride = 0;  // elements between rows of logits (padded vocab)
  const float* logits = nullptr;      // [batch, row_stride]
  const SamplingRow* rows = nullptr;  // [batch]
  // [batch] each row's history; rows must not share one. Null, or a row's
  // null counts and flags: no penalties, no banned tokens, nothing counted.
  const TokenHistory* histories = nullptr;
  int32_t* ids = nullptr;     // [batch] out
  float* logprobs = nullptr;  // [batch] out, or null
};

void SampleCpu(const SampleParams& params);

}  // namespace h3::kernels

#endif  // H3_KERNELS_SAMPLING_H_
