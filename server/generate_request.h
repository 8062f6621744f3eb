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
};

inline constexpr int kMaxRequestIdBytes = 256;
inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopStringBytes = 256;
inline constexpr int kMaxStopTokenIds = 64;

// The engine's request for the API's: tokenizes a text prompt, applies the
// documented defaults of unset fields (max_new_tokens unset: the server's
// limit, cut to what the context leaves), and checks what only the API
// knows (limits, UTF-8). InvalidArgument naming the field and the limit;
// the scheduler's Submit checks the rest (ids, sampling ranges).
// `tokenizer` may be null (token-id prompts only). `request_id` replaces an
// empty request.request_id. The deadline is left unset.
absl::StatusOr<engine::GenerationRequest> ToGenerationRequest(
    const v1::GenerateRequest& request, const std::string& request_id,
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
