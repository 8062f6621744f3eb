#include "clients/h3/run_command.h"

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "clients/h3/id_list.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "engine/offline.h"
#include "engine/runner.h"
#include "engine/sampler.h"
#include "loader/model_file.h"
#include "models/default_model.h"
#include "nlohmann/json.hpp"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/load.h"

namespace h3::cli {
namespace {

struct RunFlags {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  bool ids_given = false;  // --prompt-ids, possibly empty
  int64_t max_tokens = 64;
  bool greedy = false;
  engine::SamplingParams sampling;
  uint64_t seed = 0;
  bool ignore_eos = false;
  int64_t prefill_chunk = 1024;
  engine::BackendFlags backend;  // --device, --dtype, --attention, ...
  bool json = false;
  bool logits = false;
};

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

absl::StatusOr<std::vector<int32_t>> PromptIds(const RunFlags& flags,
                                               const tokenizer::Tokenizer* t) {
  if (flags.ids_given) {
    return ParseIdList("--prompt-ids", flags.prompt_ids);
  }
  if (t == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(flags.model,
                     " has no tokenizer: give --prompt-ids, or embed one with "
                     "`h3 convert --tokenizer PATH`"));
  }
  return t->Encode(flags.prompt);
}

struct Timing {
  double load_s = 0, prefill_s = 0, decode_s = 0;
  int64_t prompt_tokens = 0, decode_steps = 0;
};

nlohmann::ordered_json TimingJson(const Timing& t) {
  return {{"load_s", t.load_s},
          {"prefill_s", t.prefill_s},
          {"prefill_tokens_per_s", t.prompt_tokens / t.prefill_s},
          {"decode_steps", t.decode_steps},
          {"decode_s", t.decode_s},
          {"decode_tokens_per_s",
           t.decode_steps > 0 ? t.decode_steps / t.decode_s : 0.0}};
}

absl::Status Run(const RunFlags& flags) {
  const Clock::time_point load_start = Clock::now();
  H3_ASSIGN_OR_RETURN(std::unique_ptr<loader::ModelFile> file,
                      flags.model.empty()
                          ? models::OpenDefaultModel()
                          : loader::ModelFile::Open(flags.model));
  std::unique_ptr<tokenizer::Tokenizer> tok;  // null: ids only
  if (!file->tokenizer_kind().empty()) {
    H3_ASSIGN_OR_RETURN(tok, tokenizer::LoadEmbeddedTokenizer(*file));
  }
  H3_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptIds(flags, tok.get()));
  if (prompt.empty()) {
    return absl::InvalidArgumentError("the prompt has no tokens");
  }
  engine::OfflineRequest request;
  request.prompt = prompt;
  request.sampling = flags.sampling;
  if (flags.greedy) request.sampling.temperature = 0;
  request.max_new_tokens = flags.max_tokens;
  request.prompt_logits = flags.logits;
  const loader::ModelConfig& config = file->config();
  // Only ids both the model and the tokenizer know are sampled.
  if (tok != nullptr) {
    if (tok->vocab_size() > config.vocab_size) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the embedded tokenizer has ", tok->vocab_size(),
          " tokens, more than the model's vocabulary of ", config.vocab_size));
    }
    request.listed = tok->vocab_size();
    if (!flags.ignore_eos) request.eos_id = tok->eos_id();
  }
  H3_RETURN_IF_ERROR(engine::ValidateSamplingParams(request.sampling));
  request.seed = request.sampling.seed.has_value() ? *request.sampling.seed
                                                   : engine::RandomSeed();
  H3_ASSIGN_OR_RETURN(const engine::BackendOptions backend_options,
                      engine::ParseBackendFlags(flags.backend));
  H3_ASSIGN_OR_RETURN(std::unique_ptr<engine::Backend> backend,
                      engine::MakeBackend(backend_options));
  H3_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::Model> model,
      engine::Model::Load(*file, std::move(backend),
                          {.prefill_chunk = flags.prefill_chunk}));
  // One sequence; a long prompt goes in steps of at most kStepTokens.
  constexpr int64_t kStepTokens = 8192;
  const int64_t step_tokens =
      std::min<int64_t>(kStepTokens, static_cast<int64_t>(prompt.size()));
  H3_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::Runner> runner,
      engine::Runner::Create(
          std::move(model),
          {.slots = 1,
           .max_sequence_length =
               static_cast<int64_t>(prompt.size()) + flags.max_tokens,
           .max_step_tokens = step_tokens}));
  const double load_s = Seconds(load_start);

  // Streamed text, for the plain output of a model with a tokenizer.
  std::optional<tokenizer::IncrementalDecoder> stream;
  if (tok != nullptr && !flags.json) {
    H3_ASSIGN_OR_RETURN(stream, tokenizer::IncrementalDecoder::Create(&*tok));
  }
  absl::Status streamed;
  auto on_token = [&](size_t, int32_t id) {
    if (!stream.has_value() || id == request.eos_id || !streamed.ok()) return;
    absl::StatusOr<tokenizer::IncrementalDecoder::Step> step = stream->Add(id);
    if (!step.ok()) {
      streamed = step.status();
      return;
    }
    std::cout << step->text << std::flush;
  };
  std::vector<engine::OfflineResult> results;
  H3_ASSIGN_OR_RETURN(const engine::OfflineStats stats,
                      engine::GenerateOffline(*runner, {request}, step_tokens,
                                              &results, on_token));
  H3_RETURN_IF_ERROR(streamed);
  const engine::OfflineResult& result = results[0];
  const std::vector<int32_t>& generated = result.generated;
  const std::string finish_reason = result.eos ? "eos" : "length";
  const Timing timing{.load_s = load_s,
                      .prefill_s = stats.prefill_seconds,
                      .decode_s = stats.decode_seconds,
                      .prompt_tokens = static_cast<int64_t>(prompt.size()),
                      .decode_steps = stats.decode_steps};

  if (stream.has_value()) {
    H3_ASSIGN_OR_RETURN(std::string rest, stream->Finish());
    std::cout << rest << std::endl;
  } else if (!flags.json) {
    std::cout << nlohmann::json(generated).dump() << std::endl;
  }
  if (!flags.json) {
    std::cerr << absl::StrFormat(
        "h3 run: %d prompt tokens in %.3f s (%.1f tok/s); %d tokens, %d "
        "decode steps in %.3f s (%.1f tok/s); finish: %s\n",
        prompt.size(), timing.prefill_s, prompt.size() / timing.prefill_s,
        generated.size(), timing.decode_steps, timing.decode_s,
        timing.decode_steps > 0 ? timing.decode_steps / timing.decode_s : 0.0,
        finish_reason);
    return absl::OkStatus();
  }
  nlohmann::ordered_json out = {{"prompt_ids", prompt}};
  if (flags.logits) {
    out["prompt_last_logits"] =
        std::vector<float>(result.prompt_logits.begin(),
                           result.prompt_logits.begin() + config.vocab_size);
  }
  out["generated_ids"] = generated;
  if (tok != nullptr) {
    std::vector<int32_t> text_ids = generated;
    if (result.eos) text_ids.pop_back();
    H3_ASSIGN_OR_RETURN(std::string text, tok->Decode(text_ids));
    out["text"] = text;
  }
  out["finish_reason"] = finish_reason;
  out["timing"] = TimingJson(timing);
  std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd =
      app.add_subcommand("run", "Generate offline with the CPU engine");
  cmd->add_option("--model", flags->model,
                  "The model file (h3 convert); default: the embedded "
                  "default model h3-kjv");
  CLI::Option* prompt =
      cmd->add_option("--prompt", flags->prompt,
                      "The prompt as text (needs an embedded tokenizer)");
  CLI::Option* ids = cmd->add_option("--prompt-ids", flags->prompt_ids,
                                     "The prompt as comma-separated token ids");
  prompt->excludes(ids);
  cmd->add_option("--max-tokens", flags->max_tokens,
                  "Tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  CLI::Option* greedy = cmd->add_flag("--greedy", flags->greedy,
                                      "Always take the most likely token");
  engine::SamplingParams& s = flags->sampling;
  for (CLI::Option* o : {
           cmd->add_option("--temperature", s.temperature, "0 is greedy"),
           cmd->add_option("--top-k", s.top_k, "0 keeps all tokens"),
           cmd->add_option("--top-p", s.top_p, "Nucleus sampling mass"),
           cmd->add_option("--min-p", s.min_p,
                           "Drop tokens below this share of the best"),
       }) {
    o->capture_default_str()->excludes(greedy);
  }
  cmd->add_option("--repetition-penalty", s.repetition_penalty,
                  "Penalise tokens of the prompt and output (1 is off)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed,
                  "Seed of the sampler (default: random)");
  cmd->add_flag("--ignore-eos", flags->ignore_eos,
                "Do not stop at the end-of-text token");
  cmd->add_option("--device", flags->backend.device,
                  "cpu, cuda, cuda:N, or auto (the first GPU if there is one)")
      ->capture_default_str();
  cmd->add_option("--dtype", flags->backend.dtype,
                  "Weight matrices on the GPU: fp16, bf16, fp32 (auto: fp16 "
                  "on a GPU, fp32 on the CPU)")
      ->check(CLI::IsMember({"auto", "fp32", "fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--attention", flags->backend.attention,
                  "Prefill attention on a GPU: fma (fp32), flash (tensor "
                  "cores, 16-bit --dtype) or auto (flash with a 16-bit "
                  "--dtype)")
      ->check(CLI::IsMember({"auto", "fma", "flash"}))
      ->capture_default_str();
  cmd->add_option("--h3-prefill", flags->backend.h3_prefill,
                  "H3 prefill on a GPU with 16-bit --dtype: chunked (chunked "
                  "scan), chunked-mma (its shift on tensor cores), fft "
                  "(FlashConv) or auto (chunked)")
      ->check(CLI::IsMember(engine::H3PrefillKernelNames()))
      ->capture_default_str();
  cmd->add_flag("--batch-invariant", flags->backend.batch_invariant,
                "GPU: matrix products whose per-row results do not depend "
                "on the batch (docs/cuda-engine.md)");
  cmd->add_option("--batch-invariant-kernel",
                  flags->backend.batch_invariant_kernel,
                  "with --batch-invariant: skinny, cublaslt (pinned cuBLASLt "
                  "algorithms), stream, stream-split or tile (16-bit --dtype)")
      ->check(CLI::IsMember(engine::BatchInvariantKernelNames()))
      ->capture_default_str();
  cmd->add_option("--decode-products", flags->backend.decode_products,
                  "GPU: products of at most 64 rows by auto (stream up to 8 "
                  "rows), cublaslt, stream, cublaslt-tuned, stream-split, "
                  "measured or tile (docs/cuda-engine.md)")
      ->check(CLI::IsMember(engine::DecodeProductsNames()))
      ->capture_default_str();
  CLI::Option* half = cmd->add_flag(
      "--half-activations", flags->backend.half_activations,
      "GPU, 16-bit --dtype: activations that feed products in that type (the "
      "default there; docs/cuda-engine.md)");
  cmd->add_flag("--fp32-activations", flags->backend.fp32_activations,
                "GPU, 16-bit --dtype: fp32 activations instead")
      ->excludes(half);
  cmd->add_option("--pdl", flags->backend.pdl,
                  "GPU, sm_90 and later: on launches the decode kernels "
                  "overlapped (programmatic dependent launch; "
                  "docs/cuda-engine.md)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", flags->prefill_chunk,
                  "Prompt tokens per prefill chunk (state passing)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", flags->json, "Print one JSON object");
  cmd->add_flag("--logits", flags->logits,
                "With --json: add the logits at the last prompt position");
  cmd->callback([cmd, flags, exit_code] {
    absl::Status status;
    if (cmd->count("--prompt") + cmd->count("--prompt-ids") != 1) {
      status = absl::InvalidArgumentError("give --prompt or --prompt-ids");
    } else if (flags->logits && !flags->json) {
      status = absl::InvalidArgumentError("--logits needs --json");
    } else {
      if (cmd->count("--seed") > 0) flags->sampling.seed = flags->seed;
      flags->ids_given = cmd->count("--prompt-ids") > 0;
      status = Run(*flags);
    }
    if (!status.ok()) {
      std::cerr << "h3 run: " << status.message() << "\n";
      *exit_code = 1;
    }
  });
}

}  // namespace h3::cli
