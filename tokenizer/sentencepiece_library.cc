// No abseil header may be included here (see sentencepiece_library.h).
#include "tokenizer/sentencepiece_library.h"

#include <dlfcn.h>
#include <sentencepiece_processor.h>

namespace h3::tokenizer::internal {

SentencePieceLibrary::SentencePieceLibrary()
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SentencePieceLibrary::~SentencePieceLibrary() = default;

bool SentencePieceLibrary::ProcessHasFullProtobuf() {
  // DescriptorPool is in the full libprotobuf, not in protobuf-lite.
  return dlsym(RTLD_DEFAULT,
               "_ZN6google8protobuf14DescriptorPool14generated_poolEv") !=
         nullptr;
}

std::unique_ptr<SentencePieceLibrary> SentencePieceLibrary::Load(
    std::string_view model, std::string* error) {
  if (ProcessHasFullProtobuf()) {
    *error =
        "this program also loads libprotobuf, whose version clashes with the "
        "protobuf built into Debian's libsentencepiece (using it would abort "
        "the process); sentencepiece models work only in programs without "
        "libprotobuf for now";
    return nullptr;
  }
  auto library =
      std::unique_ptr<SentencePieceLibrary>(new SentencePieceLibrary());
  const sentencepiece::util::Status status =
      library->processor_->LoadFromSerializedProto(model);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return library;
}

bool SentencePieceLibrary::Encode(std::string_view text, std::vector<int>* ids,
                                  std::string* error) const {
  const sentencepiece::util::Status status = processor_->Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool SentencePieceLibrary::Decode(const std::vector<int>& ids,
                                  std::string* text, std::string* error) const {
  const sentencepiece::util::Status status = processor_->Decode(ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int SentencePieceLibrary::PieceSize() const {
  return processor_->GetPieceSize();
}
int SentencePieceLibrary::EosId() const { return processor_->eos_id(); }
int SentencePieceLibrary::BosId() const { return processor_->bos_id(); }
bool SentencePieceLibrary::IsByte(int id) const {
  return processor_->IsByte(id);
}
const std::string& SentencePieceLibrary::IdToPiece(int id) const {
  return processor_->IdToPiece(id);
}

}  // namespace h3::tokenizer::internal
