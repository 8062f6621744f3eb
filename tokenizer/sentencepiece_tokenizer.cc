#include "tokenizer/sentencepiece_tokenizer.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tokenizer/utf8.h"

namespace h3::tokenizer {

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>>
SentencePieceTokenizer::Create(absl::string_view serialized_model) {
  auto t =
      std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer());
  std::string error;
  if (!internal::SentencePieceLibrary::ModuleAvailable(&error)) {
    return absl::FailedPreconditionError(error);
  }
  t->library_ = internal::SentencePieceLibrary::Load(
      std::string_view(serialized_model.data(), serialized_model.size()),
      &error);
  if (t->library_ == nullptr) {
    return absl::DataLossError(
        absl::StrCat("not a valid sentencepiece model: ", error));
  }
  t->vocab_size_ = t->library_->PieceSize();
  if (t->vocab_size_ <= 0) {
    return absl::DataLossError("the sentencepiece model has no pieces");
  }
  t->eos_id_ = t->library_->EosId();
  t->bos_id_ = t->library_->BosId();
  t->byte_of_id_.assign(t->vocab_size_, -1);
  for (int32_t id = 0; id < t->vocab_size_; ++id) {
    if (!t->library_->IsByte(id)) continue;
    // Byte pieces are spelled "<0xAB>".
    const std::string& piece = t->library_->IdToPiece(id);
    int value = 0;
    if (piece.size() != 6 || !piece.starts_with("<0x") || piece[5] != '>' ||
        !absl::SimpleHexAtoi(absl::string_view(piece).substr(3, 2), &value)) {
      return absl::DataLossError(absl::StrCat(
          "byte piece ", id, " is spelled \"", piece, "\", not <0xHH>"));
    }
    t->byte_of_id_[id] = static_cast<int16_t>(value);
  }
  return t;
}

absl::StatusOr<std::vector<int32_t>> SentencePieceTokenizer::EncodeValidUtf8(
    absl::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  std::string error;
  if (!library_->Encode(std::string_view(text.data(), text.size()), &ids,
                        &error)) {
    return absl::InternalError(
        absl::StrCat("sentencepiece failed to encode: ", error));
  }
  return ids;
}

absl::StatusOr<std::string> SentencePieceTokenizer::Decode(
    absl::Span<const int32_t> ids) const {
  for (const int32_t id : ids) {
    H3_RETURN_IF_ERROR(CheckTokenId(id, vocab_size_));
  }
  std::string text;
  std::string error;
  if (!library_->Decode(std::span<const int32_t>(ids.data(), ids.size()), &text,
                        &error)) {
    return absl::InternalError(
        absl::StrCat("sentencepiece failed to decode: ", error));
  }
  // The library already replaces broken byte sequences; this only guards
  // the promise of valid UTF-8 against unusual models.
  if (!ValidateUtf8(text).ok()) return ReplaceInvalidUtf8(text);
  return text;
}

bool SentencePieceTokenizer::EndsInsideCharacter(
    absl::Span<const int32_t> ids) const {
  // Only byte pieces can leave a character unfinished; an unfinished
  // character is at most 3 bytes.
  std::string tail;
  for (size_t i = ids.size(); i-- > 0 && tail.size() < 3;) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size_ || byte_of_id_[id] < 0) break;
    tail.insert(tail.begin(), static_cast<char>(byte_of_id_[id]));
  }
  return IncompleteUtf8Suffix(tail) > 0;
}

absl::StatusOr<std::string> SentencePieceTokenizer::TokenText(
    int32_t id) const {
  H3_RETURN_IF_ERROR(CheckTokenId(id, vocab_size_));
  return library_->IdToPiece(id);
}

}  // namespace h3::tokenizer
