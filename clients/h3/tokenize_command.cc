#include "clients/h3/tokenize_command.h"

#include <cstdint>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "clients/h3/id_list.h"
#include "loader/model_file.h"
#include "nlohmann/json.hpp"
#include "tokenizer/load.h"

namespace h3::cli {
namespace {

struct TokenizeOptions {
  std::string tokenizer_path;
  std::string model_path;
  std::string text;
  std::string decode;
  bool parse_special = false;
};

// The tokenizer embedded in the model file at `path`.
absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadEmbeddedTokenizer(
    const std::string& path) {
  H3_ASSIGN_OR_RETURN(std::unique_ptr<loader::ModelFile> model,
                      loader::ModelFile::Open(path));
  return tokenizer::LoadEmbeddedTokenizer(*model);
}

absl::Status RunTokenize(const TokenizeOptions& options) {
  H3_ASSIGN_OR_RETURN(
      std::unique_ptr<tokenizer::Tokenizer> t,
      options.model_path.empty()
          ? tokenizer::LoadTokenizerFromPath(options.tokenizer_path)
          : LoadEmbeddedTokenizer(options.model_path));
  if (!options.decode.empty()) {
    H3_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                        ParseIdList("--decode", options.decode));
    H3_ASSIGN_OR_RETURN(std::string text, t->Decode(ids));
    std::cout << text << "\n";
    return absl::OkStatus();
  }
  std::string text = options.text;
  if (text == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin),
                std::istreambuf_iterator<char>());
  }
  H3_ASSIGN_OR_RETURN(
      std::vector<int32_t> ids,
      t->Encode(text, {.parse_special = options.parse_special}));
  std::cout << nlohmann::json(ids).dump() << "\n";
  return absl::OkStatus();
}

}  // namespace

void AddTokenizeCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Print the token ids of a text as JSON, or decode ids");
  cmd->add_option("--tokenizer", options->tokenizer_path,
                  "A sentencepiece .model, a tokenizer.json, or a directory "
                  "with vocab.json + merges.txt or encoder.json + vocab.bpe");
  cmd->add_option("--model", options->model_path,
                  "A model file (from h3 convert --tokenizer) whose embedded "
                  "tokenizer to use instead of --tokenizer");
  cmd->add_option("text", options->text, "The text, or - to read stdin");
  cmd->add_option("--decode", options->decode,
                  "Comma-separated ids to turn into text instead");
  cmd->add_flag("--parse-special", options->parse_special,
                "Turn special-token text such as <|endoftext|> into its id");
  cmd->callback([cmd, options, exit_code] {
    absl::Status status;
    if ((cmd->count("--tokenizer") > 0) == (cmd->count("--model") > 0)) {
      status = absl::InvalidArgumentError(
          "give exactly one of --tokenizer PATH and --model MODEL.h3");
    } else if (cmd->count("text") == 0 && options->decode.empty()) {
      status =
          absl::InvalidArgumentError("give TEXT, - for stdin, or --decode");
    } else if (cmd->count("text") > 0 && !options->decode.empty()) {
      status =
          absl::InvalidArgumentError("give either TEXT or --decode, not both");
    } else {
      status = RunTokenize(*options);
    }
    if (!status.ok()) {
      std::cerr << "h3 tokenize: " << status.message() << "\n";
      *exit_code = 1;
    }
  });
}

}  // namespace h3::cli
