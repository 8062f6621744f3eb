#include "clients/h3/convert_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "loader/config.h"
#include "loader/convert.h"

namespace h3::cli {
namespace {

struct ConvertFlags {
  std::string input;
  std::string output;
  std::string preset;
  std::optional<int64_t> n_heads;
  std::optional<int64_t> rotary_dim;
  std::optional<int64_t> vocab_size;
  std::string dtype = "fp16";
  std::string tokenizer;
};

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Redraws one line on stderr: [#####     ] 42% 1.2/2.9 GB 310 MB/s.
void DrawBar(uint64_t done, uint64_t total, Clock::time_point start) {
  constexpr int kWidth = 30;
  const double frac = total ? static_cast<double>(done) / total : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  const double secs = Seconds(start);
  std::fprintf(stderr, "\r[%s%s] %3d%% %.2f/%.2f GB %.0f MB/s",
               std::string(filled, '#').c_str(),
               std::string(kWidth - filled, ' ').c_str(),
               static_cast<int>(frac * 100), done / 1e9, total / 1e9,
               secs > 0 ? done / 1e6 / secs : 0.0);
  std::fflush(stderr);
}

int RunConvert(const ConvertFlags& flags) {
  loader::ConvertOptions options;
  options.input = flags.input;
  options.output = flags.output;
  options.tokenizer = flags.tokenizer;
  options.hints.n_heads = flags.n_heads;
  options.hints.rotary_dim = flags.rotary_dim;
  options.hints.vocab_size = flags.vocab_size;
  absl::StatusOr<ElementType> dtype = loader::DTypeFromFlag(flags.dtype);
  if (!dtype.ok()) {
    std::fprintf(stderr, "h3 convert: %s\n",
                 std::string(dtype.status().message()).c_str());
    return 1;
  }
  options.dtype = *dtype;
  if (!flags.preset.empty()) {
    absl::StatusOr<const loader::Preset*> preset =
        loader::FindPreset(flags.preset);
    if (!preset.ok()) {
      std::fprintf(stderr, "h3 convert: %s\n",
                   std::string(preset.status().message()).c_str());
      return 1;
    }
    options.hints.preset = *preset;
  }

  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_draw = start;
  auto progress = [&](uint64_t done, uint64_t total) {
    if (!tty) return;
    if (done < total &&
        Clock::now() - last_draw < std::chrono::milliseconds(100)) {
      return;
    }
    last_draw = Clock::now();
    DrawBar(done, total, start);
  };
  absl::StatusOr<loader::ConvertResult> result =
      loader::ConvertCheckpoint(options, progress);
  if (tty) std::fprintf(stderr, "\n");
  if (!result.ok()) {
    std::fprintf(stderr, "h3 convert: %s\n",
                 std::string(result.status().message()).c_str());
    return 1;
  }
  const double secs = Seconds(start);
  const loader::ModelConfig& c = result->config;
  std::fprintf(
      stderr,
      "%s (%s, %s) -> %s: d_model %lld, %lld layers, attention [%s], %s; "
      "read %.1f MB, wrote %.1f MB in %.2f s (%.0f MB/s read)\n",
      options.input.c_str(), result->input_format.c_str(),
      result->layout.c_str(), options.output.c_str(),
      static_cast<long long>(c.d_model), static_cast<long long>(c.n_layer),
      absl::StrJoin(c.attn_layer_idx, ", ").c_str(), flags.dtype.c_str(),
      result->bytes_read / 1e6, result->bytes_written / 1e6, secs,
      secs > 0 ? result->bytes_read / 1e6 / secs : 0.0);
  return 0;
}

}  // namespace

void AddConvertCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ConvertFlags>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Convert an H3 checkpoint (torch.save .pt or safetensors) into a model "
      "file");
  cmd->add_option("checkpoint", flags->input,
                  "PyTorch checkpoint (plain state_dict, Lightning, or old "
                  "naming) or safetensors file")
      ->required();
  cmd->add_option("-o,--output", flags->output, "Model file to write")
      ->required();
  std::vector<std::string> presets;
  for (const loader::Preset& p : loader::Presets()) {
    presets.emplace_back(p.name);
  }
  cmd->add_option("--preset", flags->preset,
                  "A released model, for what shapes cannot tell")
      ->check(CLI::IsMember(presets));
  cmd->add_option("--n-heads", flags->n_heads, "Attention heads")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--rotary-dim", flags->rotary_dim,
                  "Rotary dimensions, when the checkpoint has no inv_freq");
  cmd->add_option("--vocab-size", flags->vocab_size,
                  "Real vocabulary size (default: 50257 for a GPT-2 sized "
                  "embedding, else its rows)");
  cmd->add_option("--dtype", flags->dtype,
                  "Weights' dtype (SSM parameters stay fp32)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "Tokenizer to embed: a .model file, a tokenizer.json, or a "
                  "directory with vocab.json+merges.txt or "
                  "encoder.json+vocab.bpe");
  cmd->callback([flags, exit_code] { *exit_code = RunConvert(*flags); });
}

}  // namespace h3::cli
