// tokenizer_bench: single-thread encode and decode throughput of our GPT-2
// BPE and sentencepiece tokenizers, one repetition per run, as one JSON
// object on stdout. bench/tokenizer_bench.sh runs it in rounds alternating
// with the reference implementations and reports medians and ratios.
//
//   tokenizer_bench --gpt2 DIR --spm MODEL --docs DIR NAME...
//
// DIR (--gpt2) holds encoder.json + vocab.bpe; --docs DIR holds, for each
// corpus NAME, NAME.unique.json (the distinct documents once) and
// NAME.repeated.json (them repeated to a few MB), both JSON arrays of
// strings. Each document is one Encode call and one Decode call, as one
// request's prompt would be.
//
// Measured, per tokenizer and corpus:
//   encode_cold  GPT-2 only: a freshly loaded tokenizer (empty BPE cache)
//                encoding the unique documents;
//   encode_warm  GPT-2: the repeated documents, after the unique ones went
//                through the same tokenizer (every piece is in the BPE
//                cache);
//   encode       sentencepiece (which has no cache): the repeated documents;
//   decode       the ids of the repeated documents back to text.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/mapped_file.h"
#include "nlohmann/json.hpp"
#include "tokenizer/load.h"
#include "tokenizer/tokenizer.h"

namespace h3::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Docs = std::vector<std::string>;
using tokenizer::Tokenizer;

absl::StatusOr<Docs> ReadDocs(const std::string& path) {
  H3_ASSIGN_OR_RETURN(std::string text, loader::ReadFileToString(path));
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_array()) {
    return absl::DataLossError(absl::StrCat(path, " is not a JSON array"));
  }
  Docs docs;
  for (const nlohmann::json& doc : json) {
    if (!doc.is_string()) {
      return absl::DataLossError(absl::StrCat(path, " holds a non-string"));
    }
    docs.push_back(doc.get<std::string>());
  }
  return docs;
}

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One timed pass: bytes of text, tokens, seconds.
nlohmann::ordered_json Pass(uint64_t bytes, uint64_t tokens, double seconds) {
  return {{"bytes", bytes},
          {"tokens", tokens},
          {"seconds", seconds},
          {"mb_per_s", bytes / seconds / 1e6}};
}

// Encodes every document with `t`, keeping the ids in *ids.
absl::StatusOr<nlohmann::ordered_json> TimeEncode(
    const Tokenizer& t, const Docs& docs,
    std::vector<std::vector<int32_t>>* ids) {
  ids->clear();
  ids->reserve(docs.size());
  uint64_t bytes = 0, tokens = 0;
  const Clock::time_point start = Clock::now();
  for (const std::string& doc : docs) {
    H3_ASSIGN_OR_RETURN(std::vector<int32_t> doc_ids, t.Encode(doc));
    bytes += doc.size();
    tokens += doc_ids.size();
    ids->push_back(std::move(doc_ids));
  }
  return Pass(bytes, tokens, Since(start));
}

absl::StatusOr<nlohmann::ordered_json> TimeDecode(
    const Tokenizer& t, const std::vector<std::vector<int32_t>>& ids) {
  uint64_t bytes = 0, tokens = 0;
  const Clock::time_point start = Clock::now();
  for (const std::vector<int32_t>& doc_ids : ids) {
    H3_ASSIGN_OR_RETURN(std::string text, t.Decode(doc_ids));
    bytes += text.size();
    tokens += doc_ids.size();
  }
  return Pass(bytes, tokens, Since(start));
}

struct Flags {
  std::string gpt2;
  std::string spm;
  std::string docs;
  std::vector<std::string> corpora;
};

absl::StatusOr<nlohmann::ordered_json> Run(const Flags& flags) {
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (const std::string& corpus : flags.corpora) {
    const std::string base = flags.docs + "/" + corpus;
    H3_ASSIGN_OR_RETURN(const Docs unique, ReadDocs(base + ".unique.json"));
    H3_ASSIGN_OR_RETURN(const Docs repeated, ReadDocs(base + ".repeated.json"));
    std::vector<std::vector<int32_t>> ids;

    // A fresh GPT-2 tokenizer per corpus, so that its cache starts empty.
    H3_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> gpt2,
                        tokenizer::LoadTokenizerFromPath(flags.gpt2));
    nlohmann::ordered_json run = {{"tokenizer", "gpt2-bpe"},
                                  {"corpus", corpus}};
    H3_ASSIGN_OR_RETURN(run["encode_cold"], TimeEncode(*gpt2, unique, &ids));
    H3_ASSIGN_OR_RETURN(run["encode_warm"], TimeEncode(*gpt2, repeated, &ids));
    H3_ASSIGN_OR_RETURN(run["decode"], TimeDecode(*gpt2, ids));
    runs.push_back(std::move(run));

    H3_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> spm,
                        tokenizer::LoadTokenizerFromPath(flags.spm));
    run = {{"tokenizer", "sentencepiece"}, {"corpus", corpus}};
    H3_ASSIGN_OR_RETURN(run["encode"], TimeEncode(*spm, repeated, &ids));
    H3_ASSIGN_OR_RETURN(run["decode"], TimeDecode(*spm, ids));
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace
}  // namespace h3::bench

int main(int argc, char** argv) {
  h3::bench::Flags flags;
  CLI::App app{"Encode/decode throughput of h3serve's tokenizers (one run)",
               "tokenizer_bench"};
  app.add_option("--gpt2", flags.gpt2, "Directory with encoder.json, vocab.bpe")
      ->required();
  app.add_option("--spm", flags.spm, "A sentencepiece .model")->required();
  app.add_option("--docs", flags.docs,
                 "Directory with NAME.unique.json and NAME.repeated.json")
      ->required();
  app.add_option("corpora", flags.corpora, "Corpus names")->required();
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<nlohmann::ordered_json> runs = h3::bench::Run(flags);
  if (!runs.ok()) {
    std::cerr << "tokenizer_bench: " << runs.status().message() << "\n";
    return 1;
  }
  std::cout << runs->dump() << "\n";
  return 0;
}
