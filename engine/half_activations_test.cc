// 16-bit activations (Backend::activation_type) on the CPU backend: the
// model's half-activation path, the one the CUDA backend takes with
// --half-activations, run where CI can check it. runner_test.cc holds it to
// the runner's bitwise invariants; this file holds its logits to the fp32
// path's.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/half_float.h"
#include "engine/backend.h"
#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/config.h"
#include "loader/model_file.h"
#include "loader/safetensors.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

using h3::testing::Feed;

// Two H3 layers around an attention layer, d_model 64, rotary on.
loader::ModelConfig SmallConfig() {
  loader::ModelConfig c;
  c.d_model = 64;
  c.n_layer = 3;
  c.attn_layer_idx = {1};
  c.n_heads = 4;
  c.head_dim = 1;
  c.d_state = 16;
  c.d_inner = 256;
  c.vocab_size = 97;
  c.padded_vocab_size = 128;
  c.rotary_dim = 8;
  return c;
}

// Every logit after a prompt of 48 tokens and after each of 8 more tokens.
std::vector<std::vector<float>> Logits(const loader::ModelFile& file,
                                       ElementType activations) {
  auto runner = h3::testing::MakeRunner(file, MakeCpuBackend(activations),
                                        /*slots=*/2, /*context=*/256);
  EXPECT_TRUE(runner.ok()) << runner.status();
  if (!runner.ok()) return {};
  const SlotId slot = *(*runner)->memory().Acquire();
  std::mt19937 rng(7);
  std::vector<int32_t> prompt(48);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % 97);
  std::vector<std::vector<float>> all(1);
  EXPECT_TRUE(Feed(**runner, slot, prompt, &all.back()).ok());
  for (int i = 0; i < 8; ++i) {
    const int32_t t = static_cast<int32_t>(rng() % 97);
    all.emplace_back();
    EXPECT_TRUE(Feed(**runner, slot, {&t, 1}, &all.back()).ok());
  }
  return all;
}

class HalfActivationsTest : public ::testing::TestWithParam<ElementType> {};

// The half path rounds q|k|v, the norms', mixers' and MLP's outputs once
// each: about 5 roundings per layer, each a relative error of at most u
// (2^-11 for fp16, 2^-8 for bf16), carried to the logits through 3 layers
// and the LM head. The logits' RMS error, relative to their RMS, is held
// below 16 u: a few roundings' worth with room for the random network's
// gain. A tensor read at a wrong offset or in the wrong type gives an error
// of the order of the logits themselves (relative ~1, 500 u and more).
// The half logits must also differ from fp32 somewhere, or nothing was
// rounded.
TEST_P(HalfActivationsTest, LogitsStayWithinRoundingOfFp32) {
  const ElementType type = GetParam();
  const std::string path = h3::testing::TempPath("half_activations.h3");
  ASSERT_TRUE(h3::testing::WriteRandomModel(SmallConfig(), path).ok());
  auto file = loader::ModelFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const auto exact = Logits(**file, ElementType::kF32);
  const auto half = Logits(**file, type);
  ASSERT_EQ(exact.size(), half.size());
  const double u =
      type == ElementType::kF16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  bool differs = false;
  for (size_t step = 0; step < exact.size(); ++step) {
    ASSERT_EQ(exact[step].size(), half[step].size());
    // The real vocabulary only: padding rows of the embedding are zero.
    double err = 0, norm = 0;
    for (int v = 0; v < 97; ++v) {
      const double e = exact[step][v], h = half[step][v];
      ASSERT_TRUE(std::isfinite(h)) << "step " << step << " logit " << v;
      err += (h - e) * (h - e);
      norm += e * e;
      differs |= h != e;
    }
    const double relative = std::sqrt(err / norm);
    EXPECT_LE(relative, 16 * u) << "step " << step << ": relative RMS error "
                                << relative << " = " << relative / u << " u";
  }
  EXPECT_TRUE(differs) << "the " << ElementTypeName(type)
                       << " logits are the fp32 ones: nothing was rounded";
}

INSTANTIATE_TEST_SUITE_P(Types, HalfActivationsTest,
                         ::testing::Values(ElementType::kF16,
                                           ElementType::kBF16),
                         [](const auto& info) {
                           return std::string(ElementTypeName(info.param));
                         });

// A copy of the model file at `from` with the q|k|v and fc1 biases rounded
// to `type` (fp32 values that round to the same 16 bits as the originals).
absl::Status WriteWithRoundedBiases(const std::string& from,
                                    const loader::ModelConfig& config,
                                    ElementType type, const std::string& to) {
  auto file = loader::ModelFile::Open(from);
  if (!file.ok()) return file.status();
  const auto expected = loader::ExpectedTensors(config);
  std::vector<loader::SafetensorsWriter::Tensor> tensors;
  for (const auto& t : expected) {
    tensors.push_back({t.name, ElementType::kF32, t.shape});
  }
  auto writer = loader::SafetensorsWriter::Create(
      to, tensors, loader::ModelFileMetadata(config, "random", ""));
  if (!writer.ok()) return writer.status();
  for (const auto& t : expected) {
    auto view = (*file)->Weight(t.name);
    if (!view.ok()) return view.status();
    std::vector<float> values(view->bytes.size() / sizeof(float));
    std::memcpy(values.data(), view->bytes.data(), view->bytes.size());
    for (const char* rounded : {"q_proj.bias", "k_proj.bias", "v_proj.bias",
                                "Wqkv.bias", "fc1.bias"}) {
      if (!absl::EndsWith(t.name, rounded)) continue;
      for (float& v : values) v = RoundToType(v, type);
    }
    absl::Status appended =
        (*writer)->Append({reinterpret_cast<const uint8_t*>(values.data()),
                           values.size() * sizeof(float)});
    if (!appended.ok()) return appended;
  }
  return (*writer)->Finish();
}

// With half activations the model stores the q|k|v and fc1 biases once, in
// the activation type (engine/model.cc): changing them only below 16-bit
// resolution leaves every logit bitwise the same. fp32 activations read the
// change, so the test sees it when the model keeps fp32 biases.
TEST_P(HalfActivationsTest, QkvAndFc1BiasesAreStoredIn16Bits) {
  const ElementType type = GetParam();
  const loader::ModelConfig config = SmallConfig();
  const std::string path = h3::testing::TempPath("half_bias.h3");
  const std::string rounded = h3::testing::TempPath("half_bias_rounded.h3");
  ASSERT_TRUE(h3::testing::WriteRandomModel(config, path).ok());
  ASSERT_TRUE(WriteWithRoundedBiases(path, config, type, rounded).ok());
  auto file = loader::ModelFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto rounded_file = loader::ModelFile::Open(rounded);
  ASSERT_TRUE(rounded_file.ok()) << rounded_file.status();
  EXPECT_EQ(Logits(**file, type), Logits(**rounded_file, type));
  EXPECT_NE(Logits(**file, ElementType::kF32),
            Logits(**rounded_file, ElementType::kF32))
      << "rounding the biases changed nothing: the test cannot fail";
}

}  // namespace
}  // namespace h3::engine
