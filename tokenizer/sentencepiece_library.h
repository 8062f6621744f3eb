#ifndef H3_TOKENIZER_SENTENCEPIECE_LIBRARY_H_
#define H3_TOKENIZER_SENTENCEPIECE_LIBRARY_H_

// A sentencepiece model run by Debian's libsentencepiece, which lives in
// h3_sentencepiece_module, loaded into a link-map namespace of its own
// (sentencepiece_module_abi.h, sentencepiece_module_loader.h). That keeps the
// protobuf-lite 3.14 bundled in libsentencepiece away from the libprotobuf
// 3.21 of gRPC programs, so any program may use sentencepiece models.
//
// h3_tokenizer does not link libsentencepiece and no file of it includes
// sentencepiece's header (which clashes with Debian's abseil: see
// sentencepiece_module.cc). Errors here are plain strings;
// SentencePieceTokenizer turns them into absl::Status.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/sentencepiece_module_abi.h"

namespace h3::tokenizer::internal {

class SentencePieceModule;

// A loaded sentencepiece model. Thread-safe: every method is const.
class SentencePieceLibrary {
 public:
  // Whether this process can load models: false, with *error saying which
  // paths were tried and why they failed, if the module cannot be loaded
  // (SentencePieceModule::ForProcess).
  static bool ModuleAvailable(std::string* error);

  // Parses a serialized ModelProto with the process's module. On failure
  // returns nullptr and sets *error to the library's message (or to the
  // module's, when ModuleAvailable is false).
  static std::unique_ptr<SentencePieceLibrary> Load(std::string_view model,
                                                    std::string* error);
  // The same with a given module. REQUIRES: `module` outlives the result.
  static std::unique_ptr<SentencePieceLibrary> Load(
      const SentencePieceModule& module, std::string_view model,
      std::string* error);

  // Frees the model inside the module.
  ~SentencePieceLibrary();
  SentencePieceLibrary(const SentencePieceLibrary&) = delete;
  SentencePieceLibrary& operator=(const SentencePieceLibrary&) = delete;

  // On failure return false and set *error to the library's message.
  bool Encode(std::string_view text, std::vector<int32_t>* ids,
              std::string* error) const;
  // REQUIRES: every id in [0, PieceSize()).
  bool Decode(std::span<const int32_t> ids, std::string* text,
              std::string* error) const;

  int32_t PieceSize() const { return static_cast<int32_t>(pieces_.size()); }
  int32_t EosId() const { return eos_id_; }  // -1 if none
  int32_t BosId() const { return bos_id_; }  // -1 if none
  // REQUIRES: id in [0, PieceSize()).
  bool IsByte(int32_t id) const;
  // REQUIRES: id in [0, PieceSize()). The reference lives as long as this.
  const std::string& IdToPiece(int32_t id) const { return pieces_[id]; }

  // The number of models the process's module holds now (0 if it is not
  // loaded); for tests that check models are freed.
  static int64_t LiveModelsForTesting();

 private:
  SentencePieceLibrary(const SentencePieceModule& module, H3SpmModel* model)
      : module_(module), model_(model) {}

  const SentencePieceModule& module_;
  H3SpmModel* const model_;  // owned; freed by the module
  int32_t eos_id_ = -1;
  int32_t bos_id_ = -1;
  // Every piece's spelling, copied out of the module at load (the module
  // cannot hand out references into its own memory).
  std::vector<std::string> pieces_;
};

}  // namespace h3::tokenizer::internal

#endif  // H3_TOKENIZER_SENTENCEPIECE_LIBRARY_H_
