#ifndef H3_ENGINE_SCHEDULER_REQUEST_H_
#define H3_ENGINE_SCHEDULER_REQUEST_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/sampler.h"

namespace h3::engine {

using SteadyTime = std::chrono::steady_clock::time_point;

// One generation as the engine loop runs it: token ids in (the server
// tokenizes text prompts), token ids and text out.
struct GenerationRequest {
  // Unique among the requests the scheduler holds; Abort names it.
  std::string request_id;
  std::vector<int32_t> prompt;  // at least one id, all in the vocabulary
  SamplingParams sampling;
  int32_t max_new_tokens = 16;  // >= 1; prompt + max within the context
  // EOS and stop_token_ids cannot end the generation before this many
  // tokens (they are masked out until then). <= max_new_tokens.
  int32_t min_new_tokens = 0;
  // Text that ends the generation; it is not part of the output. Needs a
  // tokenizer. Each non-empty.
  std::vector<std::string> stop_strings;
  std::vector<int32_t> stop_token_ids;  // end the generation; not in text
  bool ignore_eos = false;
  // -1: no logprobs; 0: each token's own; n in [1, 20]: also the top n.
  int logprobs = -1;
  // Past it the generation ends with kDeadline.
  std::optional<SteadyTime> deadline;
};

enum class FinishReason {
  kNone,       // not finished
  kLength,     // max_new_tokens, or the context is full
  kStop,       // a stop string or stop token id
  kEos,        // the end-of-text token
  kCancelled,  // the client cancelled, or Abort
  kDeadline,   // the request's deadline passed
  kError,      // the engine failed; see Delta::error
};

const char* FinishReasonName(FinishReason reason);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t cached_tokens = 0;       // prompt tokens served from a saved state
  double queue_seconds = 0;        // submitted -> admitted
  double first_token_seconds = 0;  // submitted -> first token (0: none)
  double total_seconds = 0;        // submitted -> finished
};

// What a request's reader receives: new tokens since the last delta, and at
// the end the finish reason and usage. The engine loop sends ids; the text is
// made by the request's RequestOutput, on the reader's thread.
struct Delta {
  std::vector<int32_t> token_ids;
  std::vector<SampledToken> logprobs;  // one per token when asked for
  std::string text;                    // whole UTF-8 characters only
  FinishReason finish = FinishReason::kNone;
  std::string matched_stop;  // the stop string, when finish == kStop by one
  int32_t matched_stop_token = -1;  // the stop token id, when by one
  Usage usage;                      // set when finish != kNone
  absl::Status error;               // set when finish == kError
};

}  // namespace h3::engine

#endif  // H3_ENGINE_SCHEDULER_REQUEST_H_
