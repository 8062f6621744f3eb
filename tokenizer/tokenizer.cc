#include "tokenizer/tokenizer.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "tokenizer/utf8.h"

namespace h3::tokenizer {

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(
    absl::string_view text, const EncodeOptions& options) const {
  H3_RETURN_IF_ERROR(ValidateUtf8(text));
  return EncodeValidUtf8(text, options);
}

absl::Status CheckTokenId(int32_t id, int32_t vocab_size) {
  if (id < 0 || id >= vocab_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token id %d is outside the vocabulary [0, %d)", id, vocab_size));
  }
  return absl::OkStatus();
}

}  // namespace h3::tokenizer
