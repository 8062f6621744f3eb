#ifndef H3_SERVER_OPENAI_RESPONSE_H_
#define H3_SERVER_OPENAI_RESPONSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/scheduler/request.h"
#include "nlohmann/json.hpp"
#include "server/status.h"
#include "tokenizer/tokenizer.h"

// The JSON objects of the OpenAI-compatible HTTP API, as text. Pure
// functions of their arguments; invalid UTF-8 (there should be none) is
// written as U+FFFD rather than failing.
namespace h3::server {

// What every object of one completion repeats.
struct CompletionIdentity {
  std::string id;       // "cmpl-...", also the engine's request id
  int64_t created = 0;  // Unix seconds
  std::string model;    // the served model's name
};

// The one choice (index 0) of a completion, or of one streamed chunk.
struct CompletionChoice {
  std::string text;
  std::vector<int32_t> token_ids;   // written only when asked for
  nlohmann::ordered_json logprobs;  // null when not asked for
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::string matched_stop;         // the stop string that ended it
  int32_t matched_stop_token = -1;  // or the stop token id
};

// OpenAI's finish_reason: "length"; "stop" for a stop string, a stop token
// and the end-of-text token; "abort" (vLLM's) for a request aborted through
// the gRPC API; "" while not finished.
const char* OpenAiFinishReason(engine::FinishReason reason);

// The legacy completions logprobs object of successive tokens, {tokens,
// token_logprobs, top_logprobs, text_offset}: each token's text (what it
// adds to the text after the token before it, so that a sentencepiece
// token keeps its leading space; "token_id:N" without a tokenizer), its
// logprob, its top alternatives as {text: logprob} with the sampled token
// among them (as vLLM does), and offsets in Unicode code points that
// continue from call to call. Not thread-safe.
class LegacyLogprobs {
 public:
  // `tokenizer` may be null and must outlive this; the first offset is
  // `offset` (the code points of an echoed prompt, else 0); `previous` is
  // the token before the first (the prompt's last), or -1.
  LegacyLogprobs(const tokenizer::Tokenizer* tokenizer, int64_t offset,
                 int32_t previous);

  // The object for `tokens`, the next ones of the completion.
  nlohmann::ordered_json Make(const std::vector<engine::SampledToken>& tokens);

 private:
  // The text `id` adds after previous_.
  std::string TokenText(int32_t id) const;

  const tokenizer::Tokenizer* tokenizer_;
  int64_t offset_;
  int32_t previous_;
};

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::ordered_json UsageJson(const engine::Usage& usage);

// A whole "text_completion" (stream: false): its choice and usage.
// `with_token_ids` adds "token_ids" to the choice (vLLM's return_token_ids).
std::string CompletionJson(const CompletionIdentity& identity,
                           const CompletionChoice& choice, bool with_token_ids,
                           const engine::Usage& usage);

// One streamed chunk with its choice ("finish_reason" null until the last);
// `usage_field` adds "usage": null, as OpenAI does in every chunk but the
// usage chunk when stream_options.include_usage is set.
std::string ChunkJson(const CompletionIdentity& identity,
                      const CompletionChoice& choice, bool with_token_ids,
                      bool usage_field);

// The last chunk under stream_options.include_usage: no choices, the usage.
std::string UsageChunkJson(const CompletionIdentity& identity,
                           const engine::Usage& usage);

// {"error": {"message", "type", "param", "code"}}; empty param and code are
// null.
std::string ErrorJson(const HttpError& error);

// One model object of /v1/models: id, "object": "model", created, owned_by,
// root, and vLLM's max_model_len (the context).
nlohmann::ordered_json ModelJson(const std::string& name, int64_t created,
                                 int64_t max_model_len);

// The /v1/models list of `models`.
std::string ModelListJson(const std::vector<nlohmann::ordered_json>& models);

// `json` as compact text.
std::string Dump(const nlohmann::ordered_json& json);

}  // namespace h3::server

#endif  // H3_SERVER_OPENAI_RESPONSE_H_
