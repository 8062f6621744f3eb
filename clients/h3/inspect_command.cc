#include "clients/h3/inspect_command.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "loader/model_file.h"
#include "nlohmann/json.hpp"

namespace h3::cli {
namespace {

struct InspectFlags {
  std::string path;
  bool json = false;
};

int RunInspect(const InspectFlags& flags) {
  absl::StatusOr<std::unique_ptr<loader::ModelFile>> model =
      loader::ModelFile::Open(flags.path);
  if (!model.ok()) {
    std::fprintf(stderr, "h3 inspect: %s\n",
                 std::string(model.status().message()).c_str());
    return 1;
  }
  const loader::ModelFile& m = **model;
  nlohmann::ordered_json out = {{"format_version", m.format_version()}};
  const nlohmann::ordered_json config = nlohmann::ordered_json::parse(
      loader::ConfigToJson(m.config()), nullptr, /*allow_exceptions=*/false);
  for (const auto& [key, value] : config.items()) out[key] = value;
  out["parameters"] = m.parameter_count();
  out["source"] = m.source();
  nlohmann::ordered_json tokenizer = nullptr;
  if (!m.tokenizer_kind().empty()) {
    tokenizer = {{"kind", m.tokenizer_kind()},
                 {"files", nlohmann::ordered_json::object()}};
    for (const auto& [name, bytes] : m.tokenizer_files()) {
      tokenizer["files"][name] = bytes.size();
    }
  }
  out["tokenizer"] = tokenizer;
  if (flags.json) {
    std::cout << out.dump(2) << std::endl;
    return 0;
  }
  const loader::ModelConfig& c = m.config();
  std::cout << absl::StrFormat(
      "%s: h3 model file, format version %s (from %s)\n"
      "  parameters      %.1f M (%d)\n"
      "  dtype           %s (SSM parameters fp32)\n"
      "  d_model         %d, d_inner %d, %d layers\n"
      "  attention       layers [%s], %d heads, rotary dim %d\n"
      "  H3 layers       head_dim %d, d_state %d\n"
      "  vocabulary      %d (embedding rows %d)\n",
      flags.path, m.format_version(), m.source(), m.parameter_count() / 1e6,
      m.parameter_count(), loader::DTypeFlag(c.dtype), c.d_model, c.d_inner,
      c.n_layer, absl::StrJoin(c.attn_layer_idx, ", "), c.n_heads, c.rotary_dim,
      c.head_dim, c.d_state, c.vocab_size, c.padded_vocab_size);
  if (m.tokenizer_kind().empty()) {
    std::cout << "  tokenizer       none embedded\n";
  } else {
    std::vector<std::string> files;
    for (const auto& [name, bytes] : m.tokenizer_files()) {
      files.push_back(absl::StrFormat("%s (%d bytes)", name, bytes.size()));
    }
    std::cout << "  tokenizer       " << m.tokenizer_kind() << ": "
              << absl::StrJoin(files, ", ") << "\n";
  }
  return 0;
}

}  // namespace

void AddInspectCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a model file's config, parameters, dtype, tokenizer");
  cmd->add_option("model", flags->path, "Model file (h3 convert's output)")
      ->required();
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->callback([flags, exit_code] { *exit_code = RunInspect(*flags); });
}

}  // namespace h3::cli
