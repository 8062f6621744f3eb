// The API request to the engine's: defaults, limits and UTF-8 checks that
// a well-behaved gRPC client cannot trip over the wire.
#include "server/generate_request.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace h3::server {
namespace {

using ::testing::HasSubstr;

const RequestLimits kLimits{.max_sequence_length = 100, .max_new_tokens = 30};

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
