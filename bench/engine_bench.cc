// h3_engine_bench: times the engine's prefill and batched decode on one model
// file and prints JSON with every repetition. Driven by bench/engine_bench.py
// (the CPU against PyTorch) and bench/table4_bench.py (the paper's Table 4 on
// a GPU).
//
//   h3_engine_bench --model M.h3
//       [--what both|prefill|decode|table4|latency|prefix-cache|breakdown|
//               write-random]
//       [--device cpu|cuda|cuda:N|auto] [--dtype fp32|fp16|bf16]
//       [--attention auto|fma|flash]
//       [--h3-prefill auto|fft|chunked|chunked-mma]
//       [--graphs on|off] [--batch-invariant]
//       [--batch-invariant-kernel skinny|cublaslt|stream|stream-split|tile]
//       [--decode-products auto|cublaslt|stream|cublaslt-tuned|stream-split|
//                          measured|tile]
//       [--half-activations | --fp32-activations] [--pdl on|off]
//       [--reps 5]
//       [--prompt-len 512] [--prefill-chunk 1024] [--step-tokens 0]
//       [--batch 1] [--decode-context 128] [--decode-steps 32]
//       [--random-shape h3-1.3b|h3-125m|...|small]
//
// Everything runs through engine::Runner steps. prefill: one sequence,
// --prompt-len tokens from position 0 in one step, logits of the last token;
// a fresh sequence each repetition. decode: --batch sequences,
// each first prefilled with --decode-context tokens (untimed), then
// --decode-steps batched steps (timed; logits of every sequence each step).
// One untimed warm-up of each precedes the repetitions (it computes the
// per-length kernel spectra and grows the scratch buffers).
//
// table4 (bench/engine_table4.h): the H3 paper's throughput measurement.
// latency: batch-1 decode, each step timed (bench/engine_table4.h).
// prefix-cache: snapshot and restore against prefill, per prefix length
// (bench/engine_prefix_cache.h).
// breakdown: per-operation times of a decode step and of a prefill, graphs
// forced off (bench/engine_breakdown.h, docs/cuda-engine.md).
// write-random: writes a random fp32 model of --random-shape to --model
// (released preset names, or "small") and exits; nothing is timed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "base/parallel.h"
#include "base/status_macros.h"
#include "bench/engine_breakdown.h"
#include "bench/engine_prefix_cache.h"
#include "bench/engine_table4.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "engine/runner.h"
#include "loader/model_file.h"
#include "nlohmann/json.hpp"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;

// Seconds of one prefill of `tokens` into a fresh sequence, in one step,
// with the last token's logits to the host.
absl::StatusOr<double> TimePrefill(engine::Runner& runner,
                                   const std::vector<int32_t>& tokens) {
  engine::SequenceMemory& memory = runner.memory();
  H3_ASSIGN_OR_RETURN(const engine::SlotId slot, memory.Acquire());
  engine::StepPlan plan;
  plan.sequences.push_back({.slot = slot, .tokens = tokens, .logits = true});
  engine::StepResult result;
  const Clock::time_point start = Clock::now();
  const absl::Status status = runner.Execute(plan, &result);
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  memory.Release(slot);
  H3_RETURN_IF_ERROR(status);
  return seconds;
}

// Seconds of `steps` batched single-token steps (logits of every sequence
// to the host, greedy next tokens picked there) after an untimed prefill of
// each sequence.
absl::StatusOr<double> TimeDecode(engine::Runner& runner,
                                  const EngineBenchFlags& flags) {
  engine::SequenceMemory& memory = runner.memory();
  const loader::ModelConfig& config = runner.model().config();
  const int32_t vocab = static_cast<int32_t>(config.vocab_size);
  std::vector<engine::SlotId> slots;
  absl::Cleanup release = [&] {
    for (engine::SlotId slot : slots) memory.Release(slot);
  };
  H3_RETURN_IF_ERROR(PrefillContexts(runner, flags, &slots));
  engine::StepPlan plan;
  engine::StepResult result;
  std::vector<int32_t> next = RandomTokens(flags.batch, vocab, 7);
  const Clock::time_point start = Clock::now();
  for (int64_t step = 0; step < flags.decode_steps; ++step) {
    plan.sequences.clear();
    for (int64_t b = 0; b < flags.batch; ++b) {
      plan.sequences.push_back({.slot = slots[b],
                                .tokens = absl::MakeConstSpan(&next[b], 1),
                                .logits = true});
    }
    H3_RETURN_IF_ERROR(runner.Execute(plan, &result));
    // Greedy next tokens keep the work data-dependent, as in serving.
    GreedyNext(config, result.logits, next);
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The original modes: both, prefill, decode.
absl::StatusOr<Json> RunPrefillDecode(engine::Runner& runner,
                                      const EngineBenchFlags& flags) {
  const loader::ModelConfig& config = runner.model().config();
  const int32_t vocab = static_cast<int32_t>(config.vocab_size);
  const std::vector<int32_t> prompt = RandomTokens(flags.prompt_len, vocab, 1);
  Json prefill_s = Json::array(), decode_s = Json::array();
  if (flags.what != "decode") {
    // The first, untimed, is the warm-up.
    for (int r = 0; r <= flags.reps; ++r) {
      H3_ASSIGN_OR_RETURN(double s, TimePrefill(runner, prompt));
      if (r > 0) prefill_s.push_back(s);
    }
  }
  if (flags.what != "prefill") {
    for (int r = 0; r <= flags.reps; ++r) {
      H3_ASSIGN_OR_RETURN(double s, TimeDecode(runner, flags));
      if (r > 0) decode_s.push_back(s);
    }
  }
  return Json{
      {"prompt_len", flags.prompt_len},
      {"prefill_chunk", flags.prefill_chunk},
      {"batch", flags.batch},
      {"decode_context", flags.decode_context},
      {"decode_steps", flags.decode_steps},
      {"prefill_s", prefill_s},
      {"decode_s", decode_s},
  };
}

absl::Status Run(const EngineBenchFlags& flags) {
  if (flags.what == "write-random") {
    H3_ASSIGN_OR_RETURN(Json out, WriteRandomModelFile(flags));
    std::cout << out.dump() << std::endl;
    return absl::OkStatus();
  }
  H3_ASSIGN_OR_RETURN(std::unique_ptr<loader::ModelFile> file,
                      loader::ModelFile::Open(flags.model));
  H3_ASSIGN_OR_RETURN(const engine::BackendOptions backend_options,
                      engine::ParseBackendFlags(flags.backend));
  H3_ASSIGN_OR_RETURN(std::unique_ptr<engine::Backend> backend,
                      engine::MakeBackend(backend_options));
  const std::string backend_name = backend->name();
  const Clock::time_point load_start = Clock::now();
  H3_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::Model> loaded,
      engine::Model::Load(*file, std::move(backend),
                          {.prefill_chunk = flags.prefill_chunk}));
  const bool breakdown = flags.what == "breakdown";
  const engine::RunnerOptions options{
      .slots = static_cast<int>(flags.batch),
      .max_sequence_length =
          breakdown ? BreakdownSequenceLength(flags)
                    : std::max(flags.prompt_len, flags.decode_context) +
                          flags.decode_steps,
      .max_step_tokens = StepTokens(flags),
      // The profiler times ops one by one: no graphs in a breakdown.
      .graphs = flags.graphs == "on" && !breakdown,
      // Room for every snapshot the prefix-cache mode takes.
      .prefix_cache = {
          .max_bytes = flags.what == "prefix-cache" ? int64_t{1} << 40 : 0,
          .interval = 0}};
  H3_ASSIGN_OR_RETURN(std::unique_ptr<engine::Runner> runner,
                      engine::Runner::Create(std::move(loaded), options));
  const double load_s =
      std::chrono::duration<double>(Clock::now() - load_start).count();
  engine::Model* model = &runner->model();

  Json result;
  if (flags.what == "table4") {
    H3_ASSIGN_OR_RETURN(result, RunTable4(*runner, flags));
  } else if (flags.what == "latency") {
    H3_ASSIGN_OR_RETURN(result, RunLatency(*runner, flags));
  } else if (flags.what == "prefix-cache") {
    H3_ASSIGN_OR_RETURN(result, RunPrefixCache(*runner, flags));
  } else if (breakdown) {
    H3_ASSIGN_OR_RETURN(result, RunBreakdown(*runner, flags));
  } else {
    H3_ASSIGN_OR_RETURN(result, RunPrefillDecode(*runner, flags));
  }
  Json out = {
      {"engine", backend_name == "cpu" ? "h3serve-cpu" : "h3serve-cuda"},
      {"what", flags.what},
      {"backend", backend_name},
      {"dtype", ElementTypeName(model->backend().weight_type())},
      {"attention",
       engine::AttentionKernelName(engine::ResolveAttention(
           backend_options.attention, model->backend().weight_type()))},
      {"h3_prefill",
       engine::H3PrefillKernelName(engine::ResolveH3Prefill(
           backend_options.h3_prefill, model->backend().weight_type()))},
      {"batch_invariant", flags.backend.batch_invariant},
      {"batch_invariant_kernel", flags.backend.batch_invariant_kernel},
      {"decode_products", flags.backend.decode_products},
      {"pdl", flags.backend.pdl},
      {"half_activations",
       model->backend().activation_type() != ElementType::kF32},
      {"graphs",
       {{"requested", flags.graphs},
        {"applied", options.graphs && model->backend().SupportsGraphs()}}},
      {"threads", NumThreads()},
      {"model",
       {{"path", flags.model},
        {"parameters", file->parameter_count()},
        {"config", Json::parse(loader::ConfigToJson(model->config()))},
        {"load_s", load_s}}},
      {"machine", MachineJson(backend_name)},
  };
  out.update(result);
  // --decode-products measured: the kernel each product chose, and why.
  if (const std::string choices = model->backend().DescribeProductChoices();
      !choices.empty()) {
    const std::vector<std::string> lines =
        absl::StrSplit(choices, '\n', absl::SkipEmpty());
    out["product_choices"] = lines;
  }
  // A graph that could not be captured: its steps ran op by op.
  if (!runner->capture_error().ok()) {
    out["capture_error"] = std::string(runner->capture_error().message());
  }
  std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

}  // namespace
}  // namespace h3::bench

int main(int argc, char** argv) {
  CLI::App app{"Times the engine's prefill and decode (JSON on stdout)",
               "h3_engine_bench"};
  h3::bench::EngineBenchFlags flags;
  app.add_option("--model", flags.model, "The model file")->required();
  app.add_option("--what", flags.what)
      ->check(CLI::IsMember({"both", "prefill", "decode", "table4", "latency",
                             "prefix-cache", "breakdown", "write-random"}));
  app.add_option("--device", flags.backend.device,
                 "cpu, cuda, cuda:N or auto (the first usable GPU, else cpu)");
  app.add_option("--dtype", flags.backend.dtype,
                 "how weight matrices are stored")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_option("--h3-prefill", flags.backend.h3_prefill,
                 "H3 prefill on CUDA with 16-bit --dtype: chunked (the "
                 "chunked-scan kernel), chunked-mma (its shift convolution "
                 "on tensor cores), fft (the fused FlashConv kernel) or auto "
                 "(the default: chunked; docs/flashconv.md)")
      ->check(CLI::IsMember(h3::engine::H3PrefillKernelNames()));
  app.add_option("--attention", flags.backend.attention,
                 "prefill attention on CUDA: fma (fp32), flash (tensor "
                 "cores, 16-bit --dtype) or auto (the default: flash with "
                 "16-bit weights; docs/cuda-engine.md)")
      ->check(CLI::IsMember({"auto", "fma", "flash"}));
  app.add_option("--graphs", flags.graphs, "CUDA graphs for decode steps")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--batch-invariant", flags.backend.batch_invariant,
               "CUDA: every product by the batch-invariant kernel "
               "(kernels/skinny_gemm.h) instead of cuBLASLt");
  app.add_option("--batch-invariant-kernel",
                 flags.backend.batch_invariant_kernel,
                 "with --batch-invariant: skinny, cublaslt (one pinned "
                 "algorithm per shape), stream, stream-split or tile (tensor "
                 "cores, "
                 "16-bit --dtype; BackendOptions::batch_invariant_kernel)")
      ->check(CLI::IsMember(h3::engine::BatchInvariantKernelNames()));
  app.add_option("--decode-products", flags.backend.decode_products,
                 "CUDA without --batch-invariant: products of at most 64 rows "
                 "by auto, cublaslt, stream, cublaslt-tuned, stream-split, "
                 "measured or tile (BackendOptions::decode_products; JSON "
                 "product_choices says what measured chose)")
      ->check(CLI::IsMember(h3::engine::DecodeProductsNames()));
  CLI::Option* half = app.add_flag(
      "--half-activations", flags.backend.half_activations,
      "CUDA, 16-bit --dtype: activations that feed products in that type "
      "(BackendOptions::half_activations; the default there)");
  app.add_flag("--fp32-activations", flags.backend.fp32_activations,
               "CUDA, 16-bit --dtype: fp32 activations instead")
      ->excludes(half);
  app.add_option("--pdl", flags.backend.pdl,
                 "CUDA, sm_90 and later: on launches the decode kernels "
                 "overlapped (BackendOptions::pdl)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--prompt-len", flags.prompt_len)->check(CLI::PositiveNumber);
  app.add_option("--decode-context", flags.decode_context)
      ->check(CLI::PositiveNumber);
  app.add_option("--decode-steps", flags.decode_steps)
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", flags.batch)->check(CLI::PositiveNumber);
  app.add_option("--reps", flags.reps)->check(CLI::PositiveNumber);
  app.add_option("--prefill-chunk", flags.prefill_chunk)
      ->check(CLI::PositiveNumber);
  app.add_option("--prefill-batch", flags.prefill_batch,
                 "breakdown: prompts of --prompt-len in its prefill step "
                 "(at most --batch)")
      ->check(CLI::PositiveNumber);
  app.add_option("--step-tokens", flags.step_tokens,
                 "tokens one engine step may feed (table4 packs whole "
                 "prompts into steps of this size); 0: auto")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--random-shape", flags.random_shape,
                 "for --what write-random: a preset name or small");
  CLI11_PARSE(app, argc, argv);
  const absl::Status status = h3::bench::Run(flags);
  if (!status.ok()) {
    std::cerr << "h3_engine_bench: " << status << "\n";
    return 1;
  }
  return 0;
}
