// libFuzzer target: any byte string as the JSON body of POST
// /v1/completions, read (ParseCompletionRequest) and validated as the gRPC
// API's request (ToGenerationRequest); every refusal maps to an HTTP error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "server/generate_request.h"
#include "server/openai_request.h"
#include "tests/fuzz/request_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<h3::server::CompletionRequest> parsed =
      h3::server::ParseCompletionRequest(body);
  if (!parsed.ok()) {
    if (h3::server::ToOpenAiError(parsed.status()).status < 400) std::abort();
    return 0;
  }
  const h3::server::RequestLimits limits{.max_sequence_length = 2048,
                                         .max_new_tokens = 512};
  auto r = h3::server::ToGenerationRequest(parsed->generate, "fuzz-1", limits,
                                           h3::fuzz::RequestTokenizer());
  if (!r.ok()) {
    if (h3::server::ToOpenAiError(r.status()).status < 400) std::abort();
    return 0;
  }
  if (r->max_new_tokens > limits.max_new_tokens) std::abort();
  return 0;
}
