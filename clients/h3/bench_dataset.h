#ifndef H3_CLIENTS_H3_BENCH_DATASET_H_
#define H3_CLIENTS_H3_BENCH_DATASET_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace h3::cli {

// One request of a benchmark: a prompt, and exactly how many tokens to
// generate (sent as min_new_tokens = max_new_tokens with eos ignored).
struct BenchPrompt {
  // The prompt as token ids, sent as given; empty for a text prompt.
  std::vector<int32_t> ids;
  // The prompt as text, tokenized by the server; used when `ids` is empty.
  std::string text;
  int32_t output_len = 0;
};

// The token ids random prompts are drawn from: the vocabulary [0,
// vocab_size) without the ids the server treats as special (its eos and
// bos, which GetModelInfo reports; the API names no others). Copyable.
class TokenPool {
 public:
  // `special` may hold ids outside the vocabulary and -1 (none), which are
  // ignored. InvalidArgument when no id is left.
  static absl::StatusOr<TokenPool> Create(int32_t vocab_size,
                                          std::vector<int32_t> special);

  // A uniformly drawn id of the pool.
  int32_t Sample(std::mt19937_64& rng) const;

  // How many ids the pool holds.
  int32_t size() const {
    return vocab_size_ - static_cast<int32_t>(special_.size());
  }

 private:
  TokenPool(int32_t vocab_size, std::vector<int32_t> special)
      : vocab_size_(vocab_size), special_(std::move(special)) {}

  int32_t vocab_size_;
  std::vector<int32_t> special_;  // sorted, unique, inside the vocabulary
};

// A length drawn uniformly from the integers in [length * (1 - ratio),
// length * (1 + ratio)], at least 1; `length` itself when ratio is 0.
// REQUIRES: length >= 1, 0 <= ratio < 1.
int32_t SampleLength(int32_t length, double ratio, std::mt19937_64& rng);

struct RandomPromptOptions {
  int num_prompts = 0;
  int32_t input_len = 0;   // tokens after the shared prefix
  int32_t output_len = 0;  // tokens to generate
  double range_ratio = 0;  // lengths vary by up to this fraction (SampleLength)
  // The shared-prefix scenario: with prefix_len > 0, `num_prefixes` random
  // prefixes of prefix_len tokens are drawn once, and prompt i starts with
  // prefix i % num_prefixes, then has its own input_len tokens.
  int32_t prefix_len = 0;
  int num_prefixes = 1;
};

// Prompts of random token ids from `pool`, reproducible from the state of
// `rng`. REQUIRES: input_len, output_len >= 1; num_prefixes >= 1.
std::vector<BenchPrompt> RandomPrompts(const RandomPromptOptions& options,
                                       const TokenPool& pool,
                                       std::mt19937_64& rng);

// Reads text prompts from a file of JSON lines, one object per line:
// {"prompt": "text", "output_len": 64}, output_len optional (default
// `default_output_len`, at least 1); blank lines are skipped and other
// fields ignored. Returns `num_prompts` prompts: the file's first ones, or
// its prompts repeated in order when it has fewer. NotFound for a missing
// file; InvalidArgument naming the file and line for a bad one or an empty
// one.
absl::StatusOr<std::vector<BenchPrompt>> ReadJsonlPrompts(
    const std::string& path, int num_prompts, int32_t default_output_len);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_BENCH_DATASET_H_
