// Converts the fixtures of tests/reference/make_checkpoints.py (every layout,
// safetensors, fp16, rotary, head_dim 4) and compares every tensor exactly
// with the values PyTorch recorded.
#include "loader/convert.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/checkpoint.h"
#include "loader/mapped_file.h"
#include "loader/model_file.h"
#include "nlohmann/json.hpp"
#include "tests/support/temp_path.h"

namespace h3::loader {
namespace {

using ::testing::HasSubstr;

const std::string kTestdata = H3_LOADER_TESTDATA;

std::string Fnv1a64(absl::Span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

const nlohmann::json& Expected() {
  static const nlohmann::json* j = [] {
    std::ifstream in(kTestdata + "/expected.json");
    return new nlohmann::json(nlohmann::json::parse(in));
  }();
  return *j;
}

ConvertOptions OptionsFor(const std::string& fixture, ElementType dtype) {
  ConvertOptions o;
  o.input = kTestdata + "/" + fixture;
  o.output = h3::testing::TempPath(
      absl::StrCat(fixture, ".", DTypeName(dtype), ".h3"));
  o.dtype = dtype;
  const nlohmann::json& hints = Expected()[fixture]["hints"];
  if (hints.contains("n_heads"))
    o.hints.n_heads = hints["n_heads"].get<int64_t>();
  if (hints.contains("vocab_size")) {
    o.hints.vocab_size = hints["vocab_size"].get<int64_t>();
  }
  return o;
}

class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, ConvertsExactly) {
  const std::string fixture = GetParam();
  const nlohmann::json& want = Expected()[fixture];
  for (ElementType dtype :
       {ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
    ConvertOptions options = OptionsFor(fixture, dtype);
    absl::StatusOr<ConvertResult> r = ConvertCheckpoint(options, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    absl::StatusOr<std::unique_ptr<ModelFile>> m =
        ModelFile::Open(options.output);
    ASSERT_TRUE(m.ok()) << m.status();
    const ModelConfig& c = (*m)->config();
    const nlohmann::json& wc = want["config"];
    EXPECT_EQ(c.d_model, wc["d_model"].get<int64_t>());
    EXPECT_EQ(c.n_layer, wc["n_layer"].get<int64_t>());
    EXPECT_EQ(c.attn_layer_idx,
              wc["attn_layer_idx"].get<std::vector<int64_t>>());
    EXPECT_EQ(c.head_dim, wc["head_dim"].get<int64_t>());
    EXPECT_EQ(c.d_state, wc["d_state"].get<int64_t>());
    EXPECT_EQ(c.d_inner, wc["d_inner"].get<int64_t>());
    EXPECT_EQ(c.vocab_size, wc["vocab_size"].get<int64_t>());
    EXPECT_EQ(c.padded_vocab_size, wc["padded_vocab_size"].get<int64_t>());
    EXPECT_EQ(c.n_heads, wc["n_heads"].get<int64_t>());
    EXPECT_EQ(c.rotary_dim, wc["rotary_dim"].get<int64_t>());
    EXPECT_EQ(c.dtype, dtype);
    EXPECT_EQ((*m)->format_version(), "1");
    EXPECT_EQ((*m)->source(), fixture);

    const auto& tensors = want["tensors"];
    EXPECT_EQ(ExpectedTensors(c).size(), tensors.size());
    uint64_t params = 0;
    for (const auto& [name, t] : tensors.items()) {
      absl::StatusOr<WeightView> w = (*m)->Weight(name);
      ASSERT_TRUE(w.ok()) << w.status();
      EXPECT_EQ(w->shape, t["shape"].get<std::vector<int64_t>>()) << name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(w->bytes.data()) % 64, 0u) << name;
      // SSM parameters stay F32; the rest is rounded as torch rounds.
      const char* key = w->dtype == ElementType::kF32   ? "fnv_f32"
                        : w->dtype == ElementType::kF16 ? "fnv_f16"
                                                        : "fnv_bf16";
      EXPECT_EQ(Fnv1a64(w->bytes), t[key].get<std::string>())
          << fixture << " " << name << " as " << DTypeName(w->dtype);
      params += w->bytes.size() / ElementSize(w->dtype);
    }
    EXPECT_EQ((*m)->parameter_count(), params);
    EXPECT_FALSE((*m)->Weight("lm_head.weight").ok());  // tied: stored once
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, FixtureTest,
    ::testing::Values("model_plain.pt", "model_lightning.pt",
                      "model_oldnames.pt", "model.safetensors", "model_fp16.pt",
                      "model_rotary.pt", "model_headdim4.safetensors"),
    [](const auto& info) {
      std::string s = info.param;
      for (char& ch : s) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return s;
    });

TEST(CheckpointTest, DetectsLayouts) {
  auto open = [](const std::string& f) {
    return Checkpoint::Open(kTestdata + "/" + f).value();
  };
  EXPECT_FALSE(open("model_plain.pt")->lightning());
  EXPECT_FALSE(open("model_plain.pt")->old_names());
  EXPECT_TRUE(open("model_lightning.pt")->lightning());
  EXPECT_TRUE(open("model_oldnames.pt")->old_names());
  EXPECT_EQ(open("model.safetensors")->format(),
            Checkpoint::Format::kSafetensors);
  EXPECT_TRUE(open("model_plain.pt")
                  ->SameData("lm_head.weight",
                             "backbone.embeddings.word_embeddings.weight"));
}

TEST(ConvertTest, ComputesMissingInvFreq) {
  // The rotary model converted from safetensors without inv_freq, given
  // --rotary-dim, must get the values torch stored.
  auto ckpt = Checkpoint::Open(kTestdata + "/model_rotary.pt");
  ASSERT_TRUE(ckpt.ok());
  const std::string name = "backbone.layers.1.mixer.rotary_emb.inv_freq";
  ConvertOptions o = OptionsFor("model_rotary.pt", ElementType::kF32);
  ASSERT_TRUE(ConvertCheckpoint(o, nullptr).ok());
  auto full = ModelFile::Open(o.output).value();
  // Rewrite the converted file without inv_freq, as a safetensors input.
  const std::string stripped = h3::testing::TempPath("no_inv_freq.safetensors");
  std::vector<SafetensorsWriter::Tensor> layout;
  std::vector<absl::Span<const uint8_t>> data;
  for (const ExpectedTensor& t : ExpectedTensors(full->config())) {
    if (t.name == name) continue;
    WeightView w = full->Weight(t.name).value();
    layout.push_back({t.name, w.dtype, w.shape});
    data.push_back(w.bytes);
  }
  auto writer = SafetensorsWriter::Create(stripped, layout, {}).value();
  for (auto d : data) ASSERT_TRUE(writer->Append(d).ok());
  ASSERT_TRUE(writer->Finish().ok());
  ConvertOptions o2 = o;
  o2.input = stripped;
  o2.output = h3::testing::TempPath("computed_inv_freq.h3");
  absl::StatusOr<ConvertResult> without = ConvertCheckpoint(o2, nullptr);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->config.rotary_dim, 0);  // the shapes cannot tell
  o2.hints.rotary_dim = 4;
  ASSERT_TRUE(ConvertCheckpoint(o2, nullptr).ok());
  auto computed = ModelFile::Open(o2.output).value();
  WeightView a = full->Weight(name).value();
  WeightView b = computed->Weight(name).value();
  EXPECT_EQ(std::vector<uint8_t>(a.bytes.begin(), a.bytes.end()),
            std::vector<uint8_t>(b.bytes.begin(), b.bytes.end()));
}

// A model file's bytes in memory (the embedded default model) open as the
// file does; cut short they are refused, naming the stand-in name.
TEST(ConvertTest, ModelFileOpensFromBytes) {
  ConvertOptions o = OptionsFor("model.safetensors", ElementType::kF16);
  o.output = h3::testing::TempPath("from_bytes.h3");
  ASSERT_TRUE(ConvertCheckpoint(o, nullptr).ok());
  auto file = ModelFile::Open(o.output).value();
  const std::string bytes = ReadFileToString(o.output).value();
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  auto memory = ModelFile::Open("<embedded test>", {data, bytes.size()});
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ((*memory)->path(), "<embedded test>");
  EXPECT_EQ((*memory)->parameter_count(), file->parameter_count());
  EXPECT_EQ((*memory)->file_size(), file->file_size());
  const std::string emb = "backbone.embeddings.word_embeddings.weight";
  WeightView a = file->Weight(emb).value();
  WeightView b = (*memory)->Weight(emb).value();
  EXPECT_EQ(std::vector<uint8_t>(a.bytes.begin(), a.bytes.end()),
            std::vector<uint8_t>(b.bytes.begin(), b.bytes.end()));

  auto cut = ModelFile::Open("<embedded test>", {data, bytes.size() / 2});
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(cut.status().message(), HasSubstr("<embedded test>"));
}

TEST(ConvertTest, EmbedsTokenizerFiles) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(h3::testing::TempPath("tok_bpe"));
  fs::create_directories(dir);
  std::ofstream(dir / "vocab.json") << R"({"a": 0})";
  std::ofstream(dir / "merges.txt") << "#version: 0.2\na b\n";
  ConvertOptions o = OptionsFor("model.safetensors", ElementType::kF16);
  o.tokenizer = dir.string();
  o.output = h3::testing::TempPath("with_tokenizer.h3");
  absl::StatusOr<ConvertResult> r = ConvertCheckpoint(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  auto m = ModelFile::Open(o.output).value();
  EXPECT_EQ(m->tokenizer_kind(), "gpt2-bpe");
  ASSERT_EQ(m->tokenizer_files().size(), 2u);
  EXPECT_EQ(m->tokenizer_files()[0].first, "vocab.json");
  EXPECT_EQ(m->tokenizer_files()[0].second, R"({"a": 0})");
  EXPECT_EQ(m->tokenizer_files()[1].second, "#version: 0.2\na b\n");

  const fs::path sp = dir / "tok.model";
  std::ofstream(sp) << "\x0a\x03spm";
  o.tokenizer = sp.string();
  ASSERT_TRUE(ConvertCheckpoint(o, nullptr).ok());
  m = ModelFile::Open(o.output).value();
  EXPECT_EQ(m->tokenizer_kind(), "sentencepiece");
  EXPECT_EQ(m->tokenizer_files()[0].first, "tok.model");

  o.tokenizer = h3::testing::TempPath("nothing_here");
  EXPECT_EQ(ConvertCheckpoint(o, nullptr).status().code(),
            absl::StatusCode::kNotFound);
  o.tokenizer = kTestdata;  // a directory without tokenizer files
  EXPECT_THAT(ConvertCheckpoint(o, nullptr).status().message(),
              HasSubstr("expected a sentencepiece file ending in .model"));
}

TEST(ConvertTest, ReportsProgress) {
  ConvertOptions o = OptionsFor("model_plain.pt", ElementType::kF16);
  uint64_t last = 0, total = 0;
  int calls = 0;
  absl::StatusOr<ConvertResult> r =
      ConvertCheckpoint(o, [&](uint64_t done, uint64_t all) {
        EXPECT_GE(done, last);
        last = done;
        total = all;
        ++calls;
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(calls, 10);
  EXPECT_EQ(last, total);
  EXPECT_EQ(r->bytes_read, total);
}

}  // namespace
}  // namespace h3::loader
