#ifndef H3_ENGINE_SAMPLER_H_
#define H3_ENGINE_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace h3::engine {

// log(sum_i exp(x_i)), computed stably (the log-normaliser of logits).
double LogSumExp(absl::Span<const float> x);

// How the next token is chosen from a model's logits. The defaults sample
// from the model's distribution unchanged.
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

// Chooses one sequence's tokens. Not thread-safe: one per sequence. Keeps
// the counts its penalties need, so every sampled token must go through
// Sample (or Accept, for a token chosen another way).
class Sampler {
 public:
  // `vocab_size`: only logits [0, vocab_size) are candidates (the rows that
  // pad the embedding are never chosen). `prompt`: the tokens the
  // repetition penalty also covers. InvalidArgument for bad parameters.
  static absl::StatusOr<Sampler> Create(const SamplingParams& params,
                                        int32_t vocab_size,
                                        absl::Span<const int32_t> prompt);

  // The next token. REQUIRES: logits.size() >= vocab_size, no NaN.
  // `logprobs`: < 0 computes none; 0 the chosen token's; n > 0 also the n
  // most likely tokens. `banned` ids are never chosen (e.g. the end-of-text
  // token before a minimum length); logprobs still see the model's values.
  // REQUIRES: not every id banned.
  SampledToken Sample(absl::Span<const float> logits, int logprobs = -1,
                      absl::Span<const int32_t> banned = {});

  // Records `id` as generated without sampling it (e.g. a forced token).
  void Accept(int32_t id);

  const SamplingParams& params() const { return params_; }

 private:
  Sampler(const SamplingParams& params, int32_t vocab_size, uint64_t seed);

  // Applies the penalties to work_ (a copy of the logits).
  void Penalize();
  int32_t Greedy() const;
  // log softmax of logits[0, vocab_size_) at out->id and, if n > 0, the n
  // most likely ids with theirs (order_ is the scratch).
  void Logprobs(absl::Span<const float> logits, int n, SampledToken* out);
  int32_t Draw();
  // A uniform double in [0, 1) from rng_, the same on every platform.
  double Uniform();

  SamplingParams params_;
  int32_t vocab_size_;
  std::mt19937_64 rng_;
  absl::flat_hash_set<int32_t> prompt_tokens_;    // repetition penalty only
  absl::flat_hash_map<int32_t, int32_t> counts_;  // generated token -> times
  std::vector<float> work_;                       // processed logits
  std::vector<int32_t> order_;                    // candidate ids
  std::vector<double> probs_;                     // of order_
};

}  // namespace h3::engine

#endif  // H3_ENGINE_SAMPLER_H_
