// The API request to the engine's: defaults, limits and UTF-8 checks that
// a well-behaved gRPC client cannot trip over the wire.
#include "server/generate_request.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace h3::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const RequestLimits kLimits{
    .max_sequence_length = 100, .max_new_tokens = 30, .max_prompt_bytes = 1600};

// A tokenizer that counts the texts it is given: one token per byte.
class CountingTokenizer final : public tokenizer::Tokenizer {
 public:
  absl::string_view kind() const override { return "counting"; }
  int32_t vocab_size() const override { return 256; }
  int32_t eos_id() const override { return -1; }
  int32_t bos_id() const override { return -1; }
  absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const override {
    return std::string(ids.size(), 'x');
  }
  bool EndsInsideCharacter(absl::Span<const int32_t>) const override {
    return false;
  }
  absl::StatusOr<std::string> TokenText(int32_t) const override { return "x"; }
  mutable int64_t bytes_encoded = 0;

 protected:
  absl::StatusOr<std::vector<int32_t>> EncodeValidUtf8(
      absl::string_view text, const tokenizer::EncodeOptions&) const override {
    bytes_encoded += static_cast<int64_t>(text.size());
    return std::vector<int32_t>(text.size(), 1);
  }
};

v1::GenerateRequest Ids(int n) {
  v1::GenerateRequest r;
  for (int i = 0; i < n; ++i) r.mutable_token_ids()->add_ids(i);
  return r;
}

TEST(GenerateRequestTest, UnsetMaxNewTokensIsTheLimitCutToTheContext) {
  auto r = ToGenerationRequest(Ids(10), "id", kLimits, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->max_new_tokens, 30);
  EXPECT_EQ(r->request_id, "id");
  r = ToGenerationRequest(Ids(90), "id", kLimits, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->max_new_tokens, 10);
}

TEST(GenerateRequestTest, InvalidUtf8IsRefusedNamingTheField) {
  v1::GenerateRequest stop = Ids(3);
  stop.mutable_stop()->add_stop_strings("ok");
  stop.mutable_stop()->add_stop_strings("\xc3(");
  auto r = ToGenerationRequest(stop, "id", kLimits, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("stop.stop_strings[1]"));

  v1::GenerateRequest id = Ids(3);
  id.set_request_id("\xff");
  r = ToGenerationRequest(id, "", kLimits, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("request_id"));
}

TEST(GenerateRequestTest, ALongTextIsRefusedBeforeItIsTokenized) {
  CountingTokenizer tokenizer;
  v1::GenerateRequest request;
  request.set_text(std::string(1601, 'a'));
  auto r = ToGenerationRequest(request, "id", kLimits, &tokenizer);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("text: 1601 bytes; this server takes at most 1600 "
                        "(--max-prompt-bytes)"));
  EXPECT_EQ(tokenizer.bytes_encoded, 0);
  // At the limit it is tokenized (and then too long for the context).
  request.set_text(std::string(1600, 'a'));
  r = ToGenerationRequest(request, "id", kLimits, &tokenizer);
  EXPECT_EQ(tokenizer.bytes_encoded, 1600);
  EXPECT_THAT(r.status().message(), Not(HasSubstr("--max-prompt-bytes")));
  EXPECT_EQ(DefaultMaxPromptBytes(2048), 2048 * kPromptBytesPerToken);
}

TEST(GenerateRequestTest, LogprobsTopNImpliesLogprobs) {
  v1::GenerateRequest request = Ids(3);
  request.mutable_logprobs()->set_top_n(4);
  auto r = ToGenerationRequest(request, "id", kLimits, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->logprobs, 4);
  r = ToGenerationRequest(Ids(3), "id", kLimits, nullptr);
  EXPECT_EQ(r->logprobs, -1);
}

}  // namespace
}  // namespace h3::server
