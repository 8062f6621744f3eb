#include "tokenizer/test_fixtures.h"

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "tokenizer/load.h"

namespace h3::tokenizer::testing {
namespace {

std::unique_ptr<Tokenizer> LoadOrFail(
    std::string_view kind,
    const std::map<std::string, std::string_view>& files) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(kind, files);
  if (!t.ok()) {
    ADD_FAILURE() << "loading the " << kind << " fixture: " << t.status();
    return nullptr;
  }
  return *std::move(t);
}

}  // namespace

std::string TestDataPath(const std::string& name) {
  return absl::StrCat(H3_TOKENIZER_TESTDATA_DIR, "/", name);
}

absl::StatusOr<std::string> ReadTestData(const std::string& name) {
  const std::string path = TestDataPath(name);
  if (!name.ends_with(".gz")) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
    std::ostringstream s;
    s << in.rdbuf();
    return std::move(s).str();
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr)
    return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string out;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(f, buffer, sizeof(buffer))) > 0) out.append(buffer, n);
  const bool failed = n < 0;
  gzclose(f);
  if (failed) return absl::DataLossError(absl::StrCat("cannot gunzip ", path));
  return out;
}

absl::StatusOr<nlohmann::json> ReadTestJson(const std::string& name) {
  H3_ASSIGN_OR_RETURN(std::string text, ReadTestData(name));
  nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded()) {
    return absl::DataLossError(absl::StrCat(name, " is not JSON"));
  }
  return json;
}

absl::StatusOr<Gpt2Files> ReadGpt2Files() {
  Gpt2Files files;
  H3_ASSIGN_OR_RETURN(files.encoder_json, ReadTestData("gpt2/encoder.json.gz"));
  H3_ASSIGN_OR_RETURN(files.vocab_bpe, ReadTestData("gpt2/vocab.bpe.gz"));
  return files;
}

const Tokenizer& Gpt2() {
  static const Tokenizer* const tokenizer = [] {
    absl::StatusOr<Gpt2Files> files = ReadGpt2Files();
    if (!files.ok()) {
      ADD_FAILURE() << files.status();
      std::abort();
    }
    std::unique_ptr<Tokenizer> t =
        LoadOrFail("gpt2-bpe", {{"encoder.json", files->encoder_json},
                                {"vocab.bpe", files->vocab_bpe}});
    if (t == nullptr) std::abort();
    return t.release();
  }();
  return *tokenizer;
}

const Tokenizer& SentencePiece() {
  static const Tokenizer* const tokenizer = [] {
    absl::StatusOr<std::string> model = ReadTestData("spm/h3_test.model");
    if (!model.ok()) {
      ADD_FAILURE() << model.status();
      std::abort();
    }
    std::unique_ptr<Tokenizer> t =
        LoadOrFail("sentencepiece", {{"h3_test.model", *model}});
    if (t == nullptr) std::abort();
    return t.release();
  }();
  return *tokenizer;
}

void ReferenceTest::LoadReference(const std::string& reference) {
  absl::StatusOr<nlohmann::json> corpus = ReadTestJson("corpus.json");
  absl::StatusOr<nlohmann::json> expected = ReadTestJson(reference);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_TRUE(expected.ok()) << expected.status();
  corpus_ = corpus->get<std::vector<std::string>>();
  reference_ = *std::move(expected);
  ASSERT_EQ(reference_["encode"].size(), corpus_.size())
      << "regenerate the fixtures: testdata/make_fixtures.sh";
}

}  // namespace h3::tokenizer::testing
