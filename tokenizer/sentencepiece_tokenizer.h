#ifndef H3_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
#define H3_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/sentencepiece_library.h"
#include "tokenizer/tokenizer.h"

namespace h3::tokenizer {

// A sentencepiece model (BPE or unigram, as written by spm_train), run by the
// sentencepiece library. Text is normalized by the model's own rules, so
// decode(encode(x)) == x only for text the normalizer leaves alone.
// EncodeOptions::parse_special has no effect: the library matches
// user-defined symbols always and control symbols (<s>, </s>) never.
//
// Thread-safe: the library's Encode and Decode are const and keep no state
// between calls.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  // From the bytes of a .model file (a serialized ModelProto). DataLoss,
  // with the library's message, if they are not a valid model.
  // FailedPrecondition, naming the paths tried, if the sentencepiece module
  // (h3_sentencepiece_module, which holds the library) cannot be loaded
  // (sentencepiece_module_loader.h).
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Create(
      absl::string_view serialized_model);

  absl::string_view kind() const override { return "sentencepiece"; }
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t eos_id() const override { return eos_id_; }
  int32_t bos_id() const override { return bos_id_; }
  absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const override;
  bool EndsInsideCharacter(absl::Span<const int32_t> ids) const override;
  absl::StatusOr<std::string> TokenText(int32_t id) const override;

 protected:
  absl::StatusOr<std::vector<int32_t>> EncodeValidUtf8(
      absl::string_view text, const EncodeOptions& options) const override;

 private:
  SentencePieceTokenizer() = default;

  std::unique_ptr<internal::SentencePieceLibrary> library_;
  int32_t vocab_size_ = 0;
  int32_t eos_id_ = -1;
  int32_t bos_id_ = -1;
  // For byte-fallback pieces ("<0xE3>") the byte; -1 for other pieces.
  std::vector<int16_t> byte_of_id_;
};

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
