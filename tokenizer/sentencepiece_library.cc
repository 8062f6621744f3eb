#include "tokenizer/sentencepiece_library.h"

#include "tokenizer/sentencepiece_module_loader.h"

namespace h3::tokenizer::internal {
namespace {

// Room for the library's error messages, which are one line.
constexpr size_t kErrorCapacity = 512;

// Calls `call(buffer, capacity)`, which returns the size it needs, with
// `*out` resized to `guess` first and, if that was too small, once more with
// the size asked for; leaves *out at the size returned. When the call returns
// -1, sets *error to `call_error` (a message the call has written by then)
// and returns false; a second shortfall (the module giving different sizes
// for the same input) is an error too.
template <typename Container, typename Call>
bool CallWithBuffer(size_t guess, Container* out, Call call,
                    const char* call_error, std::string* error) {
  out->resize(guess);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int64_t needed = call(out->data(), out->size());
    if (needed < 0) {
      *error = call_error;
      return false;
    }
    const bool fitted = static_cast<size_t>(needed) <= out->size();
    out->resize(needed);
    if (fitted) return true;
  }
  *error = "the sentencepiece module returned more than it announced";
  return false;
}

}  // namespace

bool SentencePieceLibrary::ModuleAvailable(std::string* error) {
  return SentencePieceModule::ForProcess(error) != nullptr;
}

std::unique_ptr<SentencePieceLibrary> SentencePieceLibrary::Load(
    std::string_view model, std::string* error) {
  const SentencePieceModule* module = SentencePieceModule::ForProcess(error);
  if (module == nullptr) return nullptr;
  return Load(*module, model, error);
}

std::unique_ptr<SentencePieceLibrary> SentencePieceLibrary::Load(
    const SentencePieceModule& module, std::string_view model,
    std::string* error) {
  char message[kErrorCapacity] = "";
  H3SpmModel* loaded =
      module.load(model.data(), model.size(), message, sizeof(message));
  if (loaded == nullptr) {
    *error = message;
    return nullptr;
  }
  // Owns `loaded` from here on.
  auto library = std::unique_ptr<SentencePieceLibrary>(
      new SentencePieceLibrary(module, loaded));
  library->eos_id_ = module.eos_id(loaded);
  library->bos_id_ = module.bos_id(loaded);
  const int32_t piece_size = module.piece_size(loaded);
  library->pieces_.resize(piece_size > 0 ? piece_size : 0);
  for (int32_t id = 0; id < piece_size; ++id) {
    // Pieces are short: 32 bytes fit nearly all on the first call.
    const bool ok = CallWithBuffer(
        32, &library->pieces_[id],
        [&](char* buffer, size_t capacity) {
          return module.id_to_piece(loaded, id, buffer, capacity);
        },
        "the module refused a piece id below its piece size", error);
    if (!ok) return nullptr;
  }
  return library;
}

SentencePieceLibrary::~SentencePieceLibrary() { module_.free(model_); }

bool SentencePieceLibrary::Encode(std::string_view text,
                                  std::vector<int32_t>* ids,
                                  std::string* error) const {
  char message[kErrorCapacity] = "";
  // Without normalization rules that lengthen text, a model gives at most
  // one piece per byte (byte fallback) plus a word-boundary prefix.
  return CallWithBuffer(
      text.size() + 16, ids,
      [&](int32_t* buffer, size_t capacity) {
        return module_.encode(model_, text.data(), text.size(), buffer,
                              capacity, message, sizeof(message));
      },
      message, error);
}

bool SentencePieceLibrary::Decode(std::span<const int32_t> ids,
                                  std::string* text, std::string* error) const {
  // Decoded text is rarely longer than its pieces' spellings ("▁" becomes a
  // space, "<0xAB>" one byte or U+FFFD).
  size_t guess = 16;
  for (const int32_t id : ids) guess += pieces_[id].size();
  char message[kErrorCapacity] = "";
  return CallWithBuffer(
      guess, text,
      [&](char* buffer, size_t capacity) {
        return module_.decode(model_, ids.data(), ids.size(), buffer, capacity,
                              message, sizeof(message));
      },
      message, error);
}

bool SentencePieceLibrary::IsByte(int32_t id) const {
  return module_.is_byte(model_, id) != 0;
}

int64_t SentencePieceLibrary::LiveModelsForTesting() {
  std::string error;
  const SentencePieceModule* module = SentencePieceModule::ForProcess(&error);
  return module != nullptr ? module->live_models() : 0;
}

}  // namespace h3::tokenizer::internal
