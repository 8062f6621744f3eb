// libFuzzer target: any byte string as a gRPC GenerateRequest, through the
// validation h3serve applies before the scheduler (ToGenerationRequest). A
// request it accepts must respect the limits it was given.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "server/generate_request.h"
#include "tests/fuzz/request_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  h3::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const h3::server::RequestLimits limits{.max_sequence_length = 2048,
                                         .max_new_tokens = 512};
  auto r = h3::server::ToGenerationRequest(request, "fuzz-1", limits,
                                           h3::fuzz::RequestTokenizer());
  if (!r.ok()) return 0;
  if (r->max_new_tokens > limits.max_new_tokens) std::abort();
  if (r->request_id.empty()) std::abort();
  return 0;
}
