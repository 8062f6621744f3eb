// The API's wire contract: defaults and presence that clients rely on.
#include "gtest/gtest.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "h3/v1/text_generation.pb.h"

namespace h3 {
namespace {

TEST(ProtoTest, RequestRoundTripsThroughTheWire) {
  v1::GenerateRequest request;
  request.set_request_id("r1");
  request.set_text("Hello");
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_sampling()->set_seed(7);
  request.mutable_stop()->set_max_new_tokens(16);
  request.mutable_stop()->add_stop_strings("\n\n");

  std::string wire;
  ASSERT_TRUE(request.SerializeToString(&wire));
  v1::GenerateRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.request_id(), "r1");
  EXPECT_EQ(parsed.prompt_case(), v1::GenerateRequest::kText);
  // An explicit temperature 0 (greedy) survives, distinct from unset.
  EXPECT_TRUE(parsed.sampling().has_temperature());
  EXPECT_EQ(parsed.sampling().temperature(), 0.0f);
  EXPECT_FALSE(parsed.sampling().has_top_p());
  EXPECT_EQ(parsed.sampling().seed(), 7u);
  EXPECT_EQ(parsed.stop().max_new_tokens(), 16u);
  ASSERT_EQ(parsed.stop().stop_strings_size(), 1);
}

TEST(ProtoTest, PromptIsTextOrTokenIdsNotBoth) {
  v1::GenerateRequest request;
  request.set_text("x");
  request.mutable_token_ids()->add_ids(50256);
  EXPECT_EQ(request.prompt_case(), v1::GenerateRequest::kTokenIds);
  EXPECT_FALSE(request.has_text());
}

TEST(ProtoTest, UnfinishedResponseHasNoFinishReason) {
  v1::GenerateResponse response;
  EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_EQ(response.matched_stop_case(),
            v1::GenerateResponse::MATCHED_STOP_NOT_SET);
}

TEST(ProtoTest, ServiceHasTheDocumentedMethods) {
  const auto* service =
      v1::GenerateRequest::descriptor()->file()->FindServiceByName(
          "TextGeneration");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->full_name(), "h3.v1.TextGeneration");
  for (const char* name : {"Generate", "Complete", "Tokenize", "Detokenize",
                           "GetModelInfo", "GetServerInfo", "Abort"}) {
    EXPECT_NE(service->FindMethodByName(name), nullptr) << name;
  }
  EXPECT_TRUE(service->FindMethodByName("Generate")->server_streaming());
}

}  // namespace
}  // namespace h3
