#include "loader/config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/checkpoint.h"

namespace h3::loader {
namespace {

using ::testing::HasSubstr;

ShapeMap ShapesOf(const ModelConfig& c, bool with_inv_freq = true) {
  ShapeMap shapes;
  for (const ExpectedTensor& t : ExpectedTensors(c)) {
    if (t.computable && !with_inv_freq) continue;
    shapes[t.name] = t.shape;
  }
  return shapes;
}

ModelConfig Released(const Preset& p) {
  ModelConfig c;
  c.d_model = p.d_model;
  c.n_layer = p.n_layer;
  c.attn_layer_idx = p.attn_layer_idx;
  c.n_heads = p.n_heads;
  c.rotary_dim = p.rotary_dim;
  c.d_inner = 4 * p.d_model;
  c.vocab_size = 50257;
  c.padded_vocab_size = 50264;
  return c;
}

TEST(ConfigTest, InfersEveryReleasedModelFromShapes) {
  for (const Preset& p : Presets()) {
    const ModelConfig want = Released(p);
    ConfigHints hints;
    hints.preset = &p;
    absl::StatusOr<ModelConfig> got = InferConfig(ShapesOf(want), hints);
    ASSERT_TRUE(got.ok()) << p.name << ": " << got.status();
    EXPECT_EQ(*got, want) << p.name;
    EXPECT_TRUE(CheckShapes(*got, ShapesOf(want)).ok());
    // Without the preset, the head count must come from --n-heads.
    absl::StatusOr<ModelConfig> bare = InferConfig(ShapesOf(want), {});
    ASSERT_FALSE(bare.ok());
    EXPECT_THAT(bare.status().message(), HasSubstr("--n-heads"));
  }
}

TEST(ConfigTest, RotaryWithoutStoredInvFreqComesFromHints) {
  const Preset* p = *FindPreset("h3-2.7b-rotary");
  const ModelConfig want = Released(*p);
  ConfigHints hints;
  hints.n_heads = 20;
  hints.rotary_dim = 64;
  absl::StatusOr<ModelConfig> got =
      InferConfig(ShapesOf(want, /*with_inv_freq=*/false), hints);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->rotary_dim, 64);
  hints.rotary_dim = 32;  // contradicts the stored inv_freq [32]
  absl::StatusOr<ModelConfig> bad = InferConfig(ShapesOf(want), hints);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--rotary-dim is 32"));
}

TEST(ConfigTest, PresetMustMatchShapes) {
  ModelConfig c = Released(*FindPreset("h3-125m").value());
  ConfigHints hints;
  hints.preset = *FindPreset("h3-355m");
  absl::StatusOr<ModelConfig> got = InferConfig(ShapesOf(c), hints);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("preset h3-355m: d_model"));
  EXPECT_FALSE(FindPreset("h3-7b").ok());
}

TEST(ConfigTest, CheckShapesNamesTensorAndShapes) {
  ModelConfig c = Released(*FindPreset("h3-125m").value());
  ShapeMap shapes = ShapesOf(c);
  shapes["backbone.layers.3.mixer.kernel.kernel.B"] = {768, 32, 3};
  absl::Status s = CheckShapes(c, shapes);
  EXPECT_THAT(s.message(),
              HasSubstr("backbone.layers.3.mixer.kernel.kernel.B: expected "
                        "shape [768, 32, 2], found [768, 32, 3]"));
  shapes = ShapesOf(c);
  shapes.erase("backbone.layers.11.mlp.fc2.bias");
  EXPECT_THAT(CheckShapes(c, shapes).message(),
              HasSubstr("missing tensor backbone.layers.11.mlp.fc2.bias"));
  shapes = ShapesOf(c);
  shapes["backbone.layers.0.mixer.extra"] = {1};
  EXPECT_THAT(CheckShapes(c, shapes).message(),
              HasSubstr("unexpected tensor backbone.layers.0.mixer.extra"));
  shapes = ShapesOf(c);
  shapes["lm_head.weight"] = {50264, 768};
  EXPECT_TRUE(CheckShapes(c, shapes).ok());
  shapes["lm_head.weight"] = {50257, 768};
  EXPECT_FALSE(CheckShapes(c, shapes).ok());
}

TEST(ConfigTest, JsonRoundTripAndValidation) {
  ModelConfig c = Released(*FindPreset("h3-2.7b").value());
  c.dtype = ElementType::kBF16;
  absl::StatusOr<ModelConfig> back = ConfigFromJson(ConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  EXPECT_FALSE(ConfigFromJson("{").ok());
  EXPECT_FALSE(ConfigFromJson(R"({"d_model": 16})").ok());
  c.n_heads = 7;  // does not divide 2560
  EXPECT_FALSE(ValidateConfig(c).ok());
}

TEST(CanonicalNamesTest, OldNamingFollowsTheReferenceRemap) {
  // Two layers; old order: ln_0, then each layer's norm1/norm2.
  std::vector<std::string> old = {
      "embedding.weight",
      "s4seq.encoder.ln_0.weight",
      "s4seq.encoder.layers.0.norm1.weight",
      "s4seq.encoder.layers.0.norm2.weight",
      "s4seq.encoder.layers.1.norm1.weight",
      "s4seq.encoder.layers.1.norm2.weight",
      "s4seq.encoder.layers.1.mlp.fc1.weight",
  };
  for (auto& p : {std::string("bias")}) {
    for (size_t i = 1; i < 6; ++i) {
      std::string n = old[i];
      old.push_back(n.replace(n.size() - 6, 6, p));
    }
  }
  absl::StatusOr<std::map<std::string, std::string>> m = CanonicalNames(old);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::map<std::string, std::string>& got = *m;
  EXPECT_EQ(got.at("backbone.embeddings.word_embeddings.weight"),
            "embedding.weight");
  EXPECT_EQ(got.at("backbone.layers.0.norm1.weight"),
            "s4seq.encoder.ln_0.weight");
  EXPECT_EQ(got.at("backbone.layers.0.norm2.weight"),
            "s4seq.encoder.layers.0.norm1.weight");
  EXPECT_EQ(got.at("backbone.layers.1.norm1.weight"),
            "s4seq.encoder.layers.0.norm2.weight");
  EXPECT_EQ(got.at("backbone.layers.1.norm2.weight"),
            "s4seq.encoder.layers.1.norm1.weight");
  EXPECT_EQ(got.at("backbone.ln_f.bias"), "s4seq.encoder.layers.1.norm2.bias");
  EXPECT_EQ(got.at("backbone.layers.1.mlp.fc1.weight"),
            "s4seq.encoder.layers.1.mlp.fc1.weight");
  EXPECT_FALSE(got.contains("backbone.ln_0.weight"));
  EXPECT_EQ(got.size(), old.size());

  old.erase(old.begin() + 3);  // layers.0.norm2.weight
  EXPECT_THAT(CanonicalNames(old).status().message(),
              HasSubstr("lacks backbone.layers.0.norm2.weight"));
  EXPECT_FALSE(CanonicalNames({"backbone.x", "s4seq.encoder.x"}).ok());
}

}  // namespace
}  // namespace h3::loader
