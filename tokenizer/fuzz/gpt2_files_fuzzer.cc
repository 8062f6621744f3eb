// libFuzzer target: the files of a GPT-2 byte-level BPE tokenizer, as a
// model file embeds them, then text through the tokenizer they make.
// Input: one byte choosing the files (vocab.json + merges.txt, encoder.json
// + vocab.bpe, or tokenizer.json), then the files' contents and a text, each
// ended by a NUL byte. A tokenizer that loads must encode the text or refuse
// it with a status, and decode what it encoded to valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/load.h"
#include "tokenizer/utf8.h"

namespace {

// The next NUL-ended field of `rest` (all of it when there is no NUL).
std::string_view NextField(std::string_view& rest) {
  const size_t end = rest.find('\0');
  std::string_view field = rest.substr(0, end);
  rest =
      end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  return field;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::map<std::string, std::string_view> files;
  switch (data[0] % 3) {
    case 0:
      files["vocab.json"] = NextField(rest);
      files["merges.txt"] = NextField(rest);
      break;
    case 1:
      files["encoder.json"] = NextField(rest);
      files["vocab.bpe"] = NextField(rest);
      break;
    default:
      files["tokenizer.json"] = NextField(rest);
      break;
  }
  const std::string_view text = NextField(rest);
  auto tokenizer = h3::tokenizer::LoadTokenizer("gpt2-bpe", files);
  if (!tokenizer.ok()) return 0;
  for (bool special : {false, true}) {
    h3::tokenizer::EncodeOptions options;
    options.parse_special = special;
    absl::StatusOr<std::vector<int32_t>> ids =
        (*tokenizer)
            ->Encode(absl::string_view(text.data(), text.size()), options);
    if (!ids.ok()) continue;
    for (int32_t id : *ids) {
      if (id < 0 || id >= (*tokenizer)->vocab_size()) std::abort();
      (void)(*tokenizer)->TokenText(id);
    }
    absl::StatusOr<std::string> decoded = (*tokenizer)->Decode(*ids);
    if (!decoded.ok()) std::abort();  // every id came from the tokenizer
    if (!h3::tokenizer::ValidateUtf8(*decoded).ok()) std::abort();
    (void)(*tokenizer)->EndsInsideCharacter(*ids);
  }
  return 0;
}
