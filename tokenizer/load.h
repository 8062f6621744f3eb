#ifndef H3_TOKENIZER_LOAD_H_
#define H3_TOKENIZER_LOAD_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace h3::loader {
class ModelFile;
}  // namespace h3::loader

namespace h3::tokenizer {

// The tokenizer described by `kind` and the verbatim contents of its files,
// as a model file stores them:
//   "gpt2-bpe":      {"vocab.json", "merges.txt"}, {"encoder.json",
//                    "vocab.bpe"} or {"tokenizer.json"}
//   "sentencepiece": exactly one "<name>.model"
// InvalidArgument for an unknown kind or a set of files that is not one of
// these; DataLoss or Unimplemented from the parsers for bad contents;
// FailedPrecondition for "sentencepiece" when h3_sentencepiece_module cannot
// be loaded (sentencepiece_module_loader.h). The result does not refer to
// `files` after the call.
//
// Takes std::string_view (not Debian abseil's own absl::string_view): this is
// the contract with the model-file reader.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    std::string_view kind,
    const std::map<std::string, std::string_view>& files);

// A tokenizer's kind and its files' contents, by file name.
struct TokenizerFiles {
  std::string kind;
  std::map<std::string, std::string> files;
};

// The kind and files of the tokenizer at `path`, read from disk, by the rules
// of loader::ResolveTokenizer (the ones `h3 convert --tokenizer` embeds by).
absl::StatusOr<TokenizerFiles> ReadTokenizerFiles(const std::string& path);

// LoadTokenizer(ReadTokenizerFiles(path)).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromPath(
    const std::string& path);

// The tokenizer that `h3 convert --tokenizer` embedded in `model`.
// FailedPrecondition, saying how to embed one, if it has none (callers for
// which that is fine test model.tokenizer_kind().empty() first). The result
// does not refer to `model` after the call.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadEmbeddedTokenizer(
    const loader::ModelFile& model);

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_LOAD_H_
