#ifndef H3_SERVER_GENERATE_REQUEST_H_
#define H3_SERVER_GENERATE_REQUEST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/scheduler/request.h"
#include "h3/v1/text_generation.pb.h"
#include "tokenizer/tokenizer.h"

namespace h3::server {

// Bounds on what one request may ask for.
struct RequestLimits {
  int64_t max_sequence_length = 0;  // the model's context
  int64_t max_new_tokens = 0;       // the server's --max-new-tokens
  // Bytes of prompt text (and Tokenize text), checked before tokenizing:
  // a text this long could only become a prompt the context cannot hold.
  // --max-prompt-bytes; DefaultMaxPromptBytes when not set.
  int64_t max_prompt_bytes = 0;
};

// No tokenizer we serve makes a token of more than this many bytes of
// ordinary text, so a prompt longer than this times the context cannot fit
// it (documented in docs/security.md; --max-prompt-bytes overrides).
inline constexpr int64_t kPromptBytesPerToken = 16;
int64_t DefaultMaxPromptBytes(int64_t max_sequence_length);

// InvalidArgument naming `field` and the limit when `text` is longer than
// `max_bytes`.
absl::Status CheckTextBytes(absl::string_view field, absl::string_view text,
                            int64_t max_bytes);

inline constexpr int kMaxRequestIdBytes = 256;
inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopStringBytes = 256;
inline constexpr int kMaxStopTokenIds = 64;

// InvalidArgument naming request_id when `id` is longer than
// kMaxRequestIdBytes or not UTF-8; "" (the server assigns one) is fine.
absl::Status CheckRequestId(absl::string_view id);

// The engine's request for the API's: tokenizes a text prompt, applies the
// documented defaults of unset fields (max_new_tokens unset: the server's
// limit, cut to what the context leaves), and checks what only the API
// knows (limits, UTF-8). InvalidArgument naming the field and the limit;
// the scheduler's Submit checks the rest (ids, sampling ranges).
// A text prompt past limits.max_prompt_bytes is refused before it is
// tokenized. `tokenizer` may be null (token-id prompts only). `engine_id`
// becomes the engine request's id (request.request_id is the client's and
// only checked). The deadline is left unset.
absl::StatusOr<engine::GenerationRequest> ToGenerationRequest(
    const v1::GenerateRequest& request, const std::string& engine_id,
    const RequestLimits& limits, const tokenizer::Tokenizer* tokenizer);

// Appends `delta` to `response`: token ids, text, logprobs (each top
// alternative with its text when there is a tokenizer) and, for a final
// delta, the finish reason, matched stop and usage.
// REQUIRES: delta.finish != kError.
void AppendDelta(const engine::Delta& delta,
                 const tokenizer::Tokenizer* tokenizer,
                 v1::GenerateResponse* response);

v1::FinishReason ToProto(engine::FinishReason reason);

}  // namespace h3::server

#endif  // H3_SERVER_GENERATE_REQUEST_H_
