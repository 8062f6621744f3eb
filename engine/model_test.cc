// The whole model on the CPU backend, held to its own invariants: prefill
// equals token-by-token decoding, chunked prefill (state passing) equals one
// prefill, a batch of sequences at different positions equals each alone, a
// copied state continues like the original.
#include "engine/model.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/random_model.h"

namespace h3::engine {
namespace {

std::string WriteRandomModel(const loader::ModelConfig& config,
                             const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name + ".h3";
  const absl::Status written = h3::testing::WriteRandomModel(config, path);
  EXPECT_TRUE(written.ok()) << written;
  return path;
}

loader::ModelConfig TinyConfig(int64_t head_dim, int64_t rotary_dim) {
  loader::ModelConfig c;
  c.d_model = 16;
  c.n_layer = 3;
  c.attn_layer_idx = {1};
  c.n_heads = 2;
  c.head_dim = head_dim;
  c.d_state = 8;
  c.d_inner = 64;
  c.vocab_size = 61;
  c.padded_vocab_size = 64;
  c.rotary_dim = rotary_dim;
  return c;
}

class ModelTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override {
    auto [head_dim, rotary] = GetParam();
    config_ = TinyConfig(head_dim, rotary);
    path_ = WriteRandomModel(config_, "model_" + std::to_string(head_dim) +
                                          "_" + std::to_string(rotary));
    auto file = loader::ModelFile::Open(path_);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  std::unique_ptr<Model> Load(int64_t chunk) {
    auto model = Model::Load(*file_, MakeCpuBackend(), {chunk, 256});
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }

  std::vector<int32_t> Tokens(int n, int seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % config_.vocab_size);
    return t;
  }

  // Logits after feeding `tokens` one at a time (prefill of 1, then decode).
  std::vector<float> Stepwise(Model& model,
                              const std::vector<int32_t>& tokens) {
    auto seq = model.NewSequence();
    std::vector<float> logits(config_.padded_vocab_size);
    EXPECT_TRUE(model.Prefill(**seq, {tokens.data(), 1}, logits.data()).ok());
    for (size_t i = 1; i < tokens.size(); ++i) {
      SequenceState* s = seq->get();
      EXPECT_TRUE(model.Decode({&s, 1}, {&tokens[i], 1}, logits.data()).ok());
    }
    return logits;
  }

  loader::ModelConfig config_;
  std::string path_;
  std::unique_ptr<loader::ModelFile> file_;
};

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 double tolerance) {
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::abs(double{w}));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance * scale) << "logit " << i;
  }
}

TEST_P(ModelTest, PrefillEqualsTokenByTokenDecoding) {
  auto model = Load(1024);
  ASSERT_NE(model, nullptr);
  const auto tokens = Tokens(70, 1);
  auto seq = model->NewSequence();
  std::vector<float> logits(config_.padded_vocab_size);
  ASSERT_TRUE(model->Prefill(**seq, tokens, logits.data()).ok());
  EXPECT_EQ((*seq)->position(), 70);
  ExpectClose(Stepwise(*model, tokens), logits, 1e-4);
}

TEST_P(ModelTest, ChunkedPrefillEqualsOnePrefill) {
  auto whole = Load(1024), chunked = Load(7);
  const auto tokens = Tokens(50, 2);
  std::vector<float> a(config_.padded_vocab_size), b(a.size());
  auto s1 = whole->NewSequence(), s2 = chunked->NewSequence();
  ASSERT_TRUE(whole->Prefill(**s1, tokens, a.data()).ok());
  ASSERT_TRUE(chunked->Prefill(**s2, tokens, b.data()).ok());
  ExpectClose(b, a, 1e-5);
}

TEST_P(ModelTest, BatchDecodeEqualsEachSequenceAlone) {
  auto model = Load(1024);
  const std::vector<int> lengths = {1, 12, 5};
  std::vector<std::unique_ptr<SequenceState>> batch, alone;
  std::vector<int32_t> next;
  std::vector<float> scratch(config_.padded_vocab_size);
  for (size_t i = 0; i < lengths.size(); ++i) {
    const auto tokens = Tokens(lengths[i], 10 + i);
    batch.push_back(*model->NewSequence());
    alone.push_back(*model->NewSequence());
    ASSERT_TRUE(model->Prefill(*batch.back(), tokens, scratch.data()).ok());
    ASSERT_TRUE(model->Prefill(*alone.back(), tokens, scratch.data()).ok());
    next.push_back(static_cast<int32_t>(i + 3));
  }
  std::vector<SequenceState*> ptrs;
  for (auto& s : batch) ptrs.push_back(s.get());
  std::vector<float> batched(lengths.size() * config_.padded_vocab_size);
  ASSERT_TRUE(model->Decode(ptrs, next, batched.data()).ok());
  for (size_t i = 0; i < lengths.size(); ++i) {
    SequenceState* s = alone[i].get();
    std::vector<float> single(config_.padded_vocab_size);
    ASSERT_TRUE(model->Decode({&s, 1}, {&next[i], 1}, single.data()).ok());
    std::vector<float> row(batched.begin() + i * single.size(),
                           batched.begin() + (i + 1) * single.size());
    ExpectClose(row, single, 1e-6);
    EXPECT_EQ(batch[i]->position(), lengths[i] + 1);
  }
}

TEST_P(ModelTest, CopiedStateContinuesLikeTheOriginal) {
  auto model = Load(1024);
  const auto prompt = Tokens(20, 3);
  auto original = model->NewSequence(), copy = model->NewSequence();
  std::vector<float> a(config_.padded_vocab_size), b(a.size());
  ASSERT_TRUE(model->Prefill(**original, prompt, a.data()).ok());
  ASSERT_TRUE(model->CopySequence(**original, copy->get()).ok());
  const auto more = Tokens(6, 4);
  ASSERT_TRUE(model->Prefill(**original, more, a.data()).ok());
  ASSERT_TRUE(model->Prefill(**copy, more, b.data()).ok());
  ExpectClose(b, a, 1e-6);
}

TEST_P(ModelTest, BadRequestsAreRefusedAndLeaveTheStateAlone) {
  auto model = Load(1024);
  auto seq = model->NewSequence();
  std::vector<float> logits(config_.padded_vocab_size);
  // 61 is a padding row of the embedding (vocab_size 61, padded to 64): not
  // a token.
  for (int32_t id : {-1, 61, 64}) {
    const std::vector<int32_t> bad = {1, id};
    const absl::Status s = model->Prefill(**seq, bad, logits.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_NE(s.message().find("[0, 61)"), std::string::npos) << s.message();
  }
  EXPECT_EQ((*seq)->position(), 0);
  engine::SequenceState* batch[] = {seq->get()};
  EXPECT_EQ(model->Decode(batch, {62}, logits.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Prefill(**seq, {}, logits.data()).code(),
            absl::StatusCode::kInvalidArgument);
  const auto too_long = Tokens(257, 5);  // max_sequence_length is 256
  EXPECT_EQ(model->Prefill(**seq, too_long, logits.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*seq)->position(), 0);
}

INSTANTIATE_TEST_SUITE_P(HeadDimAndRotary, ModelTest,
                         ::testing::Values(std::tuple{1, 0}, std::tuple{1, 4},
                                           std::tuple{2, 0}),
                         [](const auto& info) {
                           return "p" +
                                  std::to_string(std::get<0>(info.param)) +
                                  "_rotary" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace h3::engine
