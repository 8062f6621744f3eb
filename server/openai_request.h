#ifndef H3_SERVER_OPENAI_REQUEST_H_
#define H3_SERVER_OPENAI_REQUEST_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "h3/v1/text_generation.pb.h"
#include "server/status.h"

namespace h3::server {

// max_tokens when a completion request leaves it out (OpenAI's default;
// null asks for the server's limit, as vLLM has it).
inline constexpr uint32_t kDefaultCompletionTokens = 16;
// Nesting of JSON arrays and objects a request body may have.
inline constexpr int kMaxJsonDepth = 32;

// A POST /v1/completions body, read. `generate` is the gRPC API's request,
// so that ToGenerationRequest applies the same defaults, limits and checks
// to both front ends; the rest is what only the HTTP API has.
struct CompletionRequest {
  v1::GenerateRequest generate;
  std::string model;  // "" when the body names none
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool echo = false;              // the prompt's text before the completion
  int logprobs = -1;              // -1: none; n >= 0: the top n at each token
  bool return_token_ids = false;  // vLLM's extension: ids in each choice
};

// Reads the JSON body of POST /v1/completions. Supported: model, prompt
// (a string, an array of token ids, or an array holding one of those),
// max_tokens, temperature, top_p, presence_penalty, frequency_penalty, seed,
// stop (a string or a list), logprobs, echo, n and best_of (1 only), stream,
// stream_options.include_usage, user (read, unused), suffix and logit_bias
// (empty only); vLLM's extensions top_k (-1 or 0: all), min_p,
// repetition_penalty, min_tokens, ignore_eos, stop_token_ids,
// return_token_ids. Other fields are ignored, as vLLM does; null is the same
// as absent except for max_tokens.
// Errors name the OpenAI field: InvalidArgument for a malformed body or a
// value of the wrong type or range; Unimplemented for what h3serve does not
// do (n or best_of above 1, several prompts, suffix, logit_bias, echo with
// logprobs, which needs the prompt's logprobs).
absl::StatusOr<CompletionRequest> ParseCompletionRequest(
    absl::string_view body);

// An error of the HTTP API from a status of this file, of
// ToGenerationRequest or of Scheduler::Submit: ToHttpError's status and
// type, the gRPC API's and the engine's field names in the message
// rewritten to OpenAI's ("stop.max_new_tokens: ..." becomes "max_tokens:
// ..."), and `param` set to the field. The one place where those names are
// mapped.
HttpError ToOpenAiError(const absl::Status& status);

}  // namespace h3::server

#endif  // H3_SERVER_OPENAI_REQUEST_H_
