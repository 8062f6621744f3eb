#ifndef H3_LOADER_TOKENIZER_FILES_H_
#define H3_LOADER_TOKENIZER_FILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace h3::loader {

// The tokenizer files a model file embeds (`h3 convert --tokenizer PATH`).
// The loader stores them verbatim; the tokenizer module parses them.
struct TokenizerFiles {
  std::string kind;                // "gpt2-bpe" or "sentencepiece"
  std::vector<std::string> names;  // file names as stored ("vocab.json", ...)
  std::vector<std::string> paths;  // where each was found, same order
};

// Resolves PATH: a file ending in `.model` is a sentencepiece model; a file
// named `tokenizer.json` is gpt2-bpe; a directory holding vocab.json and
// merges.txt, or else encoder.json and vocab.bpe, is gpt2-bpe with those two.
// NotFound if PATH does not exist; InvalidArgument naming what was expected
// for anything else.
absl::StatusOr<TokenizerFiles> ResolveTokenizer(const std::string& path);

}  // namespace h3::loader

#endif  // H3_LOADER_TOKENIZER_FILES_H_
