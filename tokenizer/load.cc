#include "tokenizer/load.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "loader/mapped_file.h"
#include "loader/model_file.h"
#include "loader/tokenizer_files.h"
#include "tokenizer/gpt2_bpe.h"
#include "tokenizer/gpt2_vocab_files.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace h3::tokenizer {
namespace {

std::string FileNames(const std::map<std::string, std::string_view>& files) {
  std::vector<std::string> names;
  for (const auto& [name, contents] : files) names.push_back(name);
  return names.empty() ? "no files" : absl::StrJoin(names, ", ");
}

// Debian's abseil has its own string_view class; the contract uses std's.
absl::string_view Absl(std::string_view s) { return {s.data(), s.size()}; }

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGpt2(
    const std::map<std::string, std::string_view>& files) {
  auto has = [&](const char* name) { return files.count(name) > 0; };
  auto at = [&](const char* name) { return Absl(files.at(name)); };
  absl::StatusOr<Gpt2Vocabulary> vocabulary;
  if (files.size() == 2 && has("vocab.json") && has("merges.txt")) {
    vocabulary = ParseGpt2VocabAndMerges(at("vocab.json"), at("merges.txt"));
  } else if (files.size() == 2 && has("encoder.json") && has("vocab.bpe")) {
    vocabulary = ParseGpt2VocabAndMerges(at("encoder.json"), at("vocab.bpe"));
  } else if (files.size() == 1 && has("tokenizer.json")) {
    vocabulary = ParseHfTokenizerJson(at("tokenizer.json"));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "a gpt2-bpe tokenizer needs vocab.json + merges.txt, encoder.json + "
        "vocab.bpe, or tokenizer.json; got ",
        FileNames(files)));
  }
  if (!vocabulary.ok()) return vocabulary.status();
  H3_ASSIGN_OR_RETURN(std::unique_ptr<Gpt2BpeTokenizer> t,
                      Gpt2BpeTokenizer::Create(*vocabulary));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    std::string_view kind,
    const std::map<std::string, std::string_view>& files) {
  if (kind == "gpt2-bpe") return LoadGpt2(files);
  if (kind == "sentencepiece") {
    if (files.size() != 1 || !files.begin()->first.ends_with(".model")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a sentencepiece tokenizer needs exactly one <name>.model file; got ",
          FileNames(files)));
    }
    H3_ASSIGN_OR_RETURN(
        std::unique_ptr<SentencePieceTokenizer> t,
        SentencePieceTokenizer::Create(Absl(files.begin()->second)));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tokenizer kind \"", Absl(kind),
                   "\" (expected \"gpt2-bpe\" or \"sentencepiece\")"));
}

absl::StatusOr<TokenizerFiles> ReadTokenizerFiles(const std::string& path) {
  // Which files a path names is the model file's rule; the loader states it.
  H3_ASSIGN_OR_RETURN(loader::TokenizerFiles found,
                      loader::ResolveTokenizer(path));
  TokenizerFiles out;
  out.kind = found.kind;
  for (size_t i = 0; i < found.names.size(); ++i) {
    H3_ASSIGN_OR_RETURN(out.files[found.names[i]],
                        loader::ReadFileToString(found.paths[i]));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromPath(
    const std::string& path) {
  H3_ASSIGN_OR_RETURN(TokenizerFiles read, ReadTokenizerFiles(path));
  const std::map<std::string, std::string_view> views(read.files.begin(),
                                                      read.files.end());
  return LoadTokenizer(read.kind, views);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadEmbeddedTokenizer(
    const loader::ModelFile& model) {
  if (model.tokenizer_kind().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        model.path(),
        " has no tokenizer embedded; embed one by converting the checkpoint "
        "again with `h3 convert CHECKPOINT -o MODEL.h3 --tokenizer PATH`"));
  }
  std::map<std::string, std::string_view> files;
  for (const auto& [name, contents] : model.tokenizer_files()) {
    files.emplace(name, std::string_view(contents.data(), contents.size()));
  }
  return LoadTokenizer(model.tokenizer_kind(), files);
}

}  // namespace h3::tokenizer
