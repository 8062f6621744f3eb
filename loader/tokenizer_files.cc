#include "loader/tokenizer_files.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace h3::loader {

absl::StatusOr<TokenizerFiles> ResolveTokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const fs::file_status status = fs::status(p, ec);
  if (ec || !fs::exists(status)) {
    return absl::NotFoundError(absl::StrCat("tokenizer ", path, " not found"));
  }
  auto is_file = [](const fs::path& f) {
    std::error_code e;
    return fs::is_regular_file(f, e);
  };
  if (fs::is_regular_file(status)) {
    const std::string name = p.filename().string();
    if (absl::EndsWith(name, ".model")) {
      return TokenizerFiles{"sentencepiece", {name}, {path}};
    }
    if (name == "tokenizer.json") {
      return TokenizerFiles{"gpt2-bpe", {name}, {path}};
    }
  } else if (fs::is_directory(status)) {
    for (auto [a, b] : {std::pair{"vocab.json", "merges.txt"},
                        std::pair{"encoder.json", "vocab.bpe"}}) {
      if (is_file(p / a) && is_file(p / b)) {
        return TokenizerFiles{
            "gpt2-bpe", {a, b}, {(p / a).string(), (p / b).string()}};
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "tokenizer ", path,
      ": expected a sentencepiece file ending in .model, a tokenizer.json, or "
      "a directory holding vocab.json + merges.txt (or encoder.json + "
      "vocab.bpe)"));
}

}  // namespace h3::loader
