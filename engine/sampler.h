#ifndef H3_ENGINE_SAMPLER_H_
#define H3_ENGINE_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/sampling.h"

namespace h3::engine {

// log(sum_i exp(x_i)), computed stably (the log-normaliser of logits).
double LogSumExp(absl::Span<const float> x);

// How the next token is chosen from a model's logits (the algorithm:
// kernels/sampling.h, run on the model's backend). The defaults sample from
// the model's distribution unchanged.
struct SamplingParams {
  // 0 picks the most likely token (greedy); otherwise logits are divided by
  // it before the filters below. In [0, 100].
  float temperature = 1.0f;
  // Keep only the k most likely tokens; 0 keeps all. >= 0.
  int32_t top_k = 0;
  // Keep the smallest set of most likely tokens whose probability reaches
  // top_p. In (0, 1].
  float top_p = 1.0f;
  // Drop tokens less likely than min_p times the most likely one. In [0, 1].
  float min_p = 0.0f;
  // Divides positive logits and multiplies negative ones of every token seen
  // in the prompt or the output (the CTRL / Hugging Face rule). In (0, 10];
  // 1 is off.
  float repetition_penalty = 1.0f;
  // Subtracted from the logit of every token already generated (presence)
  // and once more per time it was generated (frequency), as in OpenAI's
  // API. In [-2, 2].
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // The random stream; a sequence's tokens depend only on its seed, its
  // logits and these parameters, never on the batch it runs in. Without a
  // seed, a random one.
  std::optional<uint64_t> seed;
};

// InvalidArgument naming the field and its allowed range.
absl::Status ValidateSamplingParams(const SamplingParams& params);

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int32_t id = 0;
  // log softmax of the model's logits (before penalties, temperature and
  // filters) at `id`; set when logprobs were asked for.
  float logprob = 0.0f;
  // The most likely tokens under the same distribution, best first (ties:
  // lower id first).
  std::vector<TokenLogprob> top;
};

// The kernel's row for a sequence (kernels/sampling.h): `seed` is the
// sequence's (params.seed, or one drawn at random when the request had
// none), `step` the number of tokens it has generated so far.
kernels::SamplingRow SamplingRowOf(const SamplingParams& params, uint64_t seed,
                                   uint64_t step);

// The most alternatives a request may ask for with its logprobs.
inline constexpr int kMaxTopLogprobs = 20;

// The token flags of a request's sampling history (kernels/sampling.h), the
// one place these rules live: kTokenInPrompt on the prompt's ids;
// kTokenBanned on every id from `listed` on (ids the tokenizer has no text
// for are never sampled) and on the `held` ids (end of text, stop token ids)
// until the request may end (ReleaseHeldTokens).
// REQUIRES: prompt and held ids in [0, vocab_size); listed <= vocab_size.
std::vector<uint8_t> RequestTokenFlags(int64_t vocab_size, int32_t listed,
                                       absl::Span<const int32_t> prompt,
                                       absl::Span<const int32_t> held);
// Lifts the ban of the `held` ids below `listed` (min_new_tokens reached).
void ReleaseHeldTokens(absl::Span<const int32_t> held, int32_t listed,
                       std::vector<uint8_t>& flags);

// A seed for a request without one.
uint64_t RandomSeed();

// The n most likely of the ids [0, listed), best first (ties: lower id
// first), with their log softmax over logits[0, vocab_size): the model's
// distribution, before penalties, temperature and filters.
// REQUIRES: listed <= vocab_size <= logits.size(), no NaN.
std::vector<TokenLogprob> TopLogprobs(absl::Span<const float> logits,
                                      int32_t vocab_size, int32_t listed,
                                      int n);

}  // namespace h3::engine

#endif  // H3_ENGINE_SAMPLER_H_
