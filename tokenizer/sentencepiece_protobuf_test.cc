// Sentencepiece models in a process that uses libprotobuf (as h3serve and
// h3 do, through gRPC and the h3.v1 API). Debian's libsentencepiece carries
// its own protobuf-lite 3.14; linked into this process it would clash with
// libprotobuf 3.21 (a crash at start-up or an abort at the first model).
// Loaded in its own link-map namespace (sentencepiece_module_abi.h) it
// cannot.
#include <dlfcn.h>

#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "h3/v1/text_generation.pb.h"
#include "nlohmann/json.hpp"
#include "tokenizer/test_fixtures.h"

namespace h3::tokenizer {
namespace {

TEST(SentencePieceWithProtobuf, AgreesWithTheReferenceAfterUsingLibprotobuf) {
  // This process has the full libprotobuf, the condition under which
  // sentencepiece models used to be refused...
  ASSERT_NE(dlsym(RTLD_DEFAULT,
                  "_ZN6google8protobuf14DescriptorPool14generated_poolEv"),
            nullptr);
  // ...and has used it before the first model loads.
  const google::protobuf::Descriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(
          "h3.v1.TokenIds");
  ASSERT_NE(descriptor, nullptr);
  h3::v1::TokenIds parsed;
  ASSERT_TRUE(
      google::protobuf::TextFormat::ParseFromString("ids: 1 ids: 2", &parsed));
  EXPECT_EQ(parsed.ids_size(), 2);

  absl::StatusOr<nlohmann::json> corpus = testing::ReadTestJson("corpus.json");
  absl::StatusOr<nlohmann::json> reference =
      testing::ReadTestJson("spm/reference.json");
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_TRUE(reference.ok()) << reference.status();
  const Tokenizer& t = testing::SentencePiece();
  for (size_t i = 0; i < corpus->size(); ++i) {
    const std::string text = (*corpus)[i].get<std::string>();
    absl::StatusOr<std::vector<int32_t>> ids = t.Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, (*reference)["encode"][i].get<std::vector<int32_t>>())
        << "corpus[" << i << "]";
    EXPECT_EQ(t.Decode(*ids).value(), text);

    // And libprotobuf still works with sentencepiece loaded.
    h3::v1::TokenIds message;
    message.mutable_ids()->Add(ids->begin(), ids->end());
    h3::v1::TokenIds round_trip;
    ASSERT_TRUE(round_trip.ParseFromString(message.SerializeAsString()));
    EXPECT_EQ(
        std::vector<int32_t>(round_trip.ids().begin(), round_trip.ids().end()),
        *ids);
  }
}

}  // namespace
}  // namespace h3::tokenizer
