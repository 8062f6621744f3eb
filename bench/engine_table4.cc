#include "bench/engine_table4.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "base/build_info.h"
#include "base/status_macros.h"
#include "engine/devices.h"
#include "engine/offline.h"
#include "tests/support/random_model.h"

namespace h3::bench {

using Json = nlohmann::ordered_json;

std::vector<int32_t> RandomTokens(int64_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = pick(rng);
  return tokens;
}

void GreedyNext(const loader::ModelConfig& config,
                const std::vector<float>& logits, std::vector<int32_t>& next) {
  const int64_t row = config.padded_vocab_size;
  for (size_t b = 0; b < next.size(); ++b) {
    const float* x = logits.data() + b * row;
    next[b] =
        static_cast<int32_t>(std::max_element(x, x + config.vocab_size) - x);
  }
}

int64_t StepTokens(const EngineBenchFlags& flags) {
  if (flags.step_tokens > 0) return flags.step_tokens;
  const int64_t longest = std::max(flags.prompt_len, flags.decode_context);
  return std::max(longest, std::min(flags.batch * longest, kAutoStepTokens));
}

absl::Status PrefillContexts(engine::Runner& runner,
                             const EngineBenchFlags& flags,
                             std::vector<engine::SlotId>* slots) {
  const int32_t vocab =
      static_cast<int32_t>(runner.model().config().vocab_size);
  engine::StepPlan plan;
  engine::StepResult result;
  for (int64_t b = 0; b < flags.batch; ++b) {
    H3_ASSIGN_OR_RETURN(const engine::SlotId slot, runner.memory().Acquire());
    slots->push_back(slot);
    const std::vector<int32_t> context =
        RandomTokens(flags.decode_context, vocab, 100 + b);
    plan.sequences = {{.slot = slot, .tokens = context}};
    H3_RETURN_IF_ERROR(runner.Execute(plan, &result));
  }
  return absl::OkStatus();
}

namespace {

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripLeadingAsciiWhitespace(
            absl::string_view(line).substr(colon + 1)));
      }
    }
  }
  return "unknown";
}

// The index in "cuda:N"; 0 for "cuda"; -1 for any other backend.
int CudaIndex(const std::string& backend_name) {
  if (backend_name == "cuda") return 0;
  int index = 0;
  if (absl::StartsWith(backend_name, "cuda:") &&
      absl::SimpleAtoi(absl::string_view(backend_name).substr(5), &index)) {
    return index;
  }
  return -1;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

Json MachineJson(const std::string& backend_name) {
  const BuildInfo& build = GetBuildInfo();
  Json machine = {
      {"cpu", CpuModelName()},
      {"build",
       {{"version", build.version},
        {"git_commit", build.git_commit},
        {"build_type", build.build_type},
        {"cuda_enabled", build.cuda_enabled},
        {"cuda_version", build.cuda_version}}},
  };
  const int index = CudaIndex(backend_name);
  if (index < 0) return machine;
  const engine::CudaInventory inventory = engine::ListCudaDevices();
  machine["driver_version"] = inventory.driver_version;
  machine["runtime_version"] = inventory.runtime_version;
  for (const engine::DeviceInfo& d : inventory.devices) {
    if (d.index != index) continue;
    machine["gpu"] = {
        {"index", d.index},
        {"name", d.name},
        {"pci_bus_id", d.pci_bus_id},
        {"compute_capability", std::to_string(d.compute_major) + "." +
                                   std::to_string(d.compute_minor)},
        {"multiprocessors", d.multiprocessors},
        {"total_memory_bytes", d.total_memory_bytes},
        {"l2_cache_bytes", d.l2_cache_bytes},
    };
  }
  return machine;
}

absl::StatusOr<Json> RunTable4(engine::Runner& runner,
                               const EngineBenchFlags& flags) {
  const int32_t vocab =
      static_cast<int32_t>(runner.model().config().vocab_size);
  std::vector<engine::OfflineRequest> requests(flags.batch);
  for (int64_t b = 0; b < flags.batch; ++b) {
    requests[b].prompt = RandomTokens(flags.prompt_len, vocab, 1000 + b);
    requests[b].sampling.temperature = 0;
    // The first token comes with the prompt; then decode_steps steps.
    requests[b].max_new_tokens = flags.decode_steps + 1;
  }
  const int64_t step_tokens = StepTokens(flags);
  Json prefill_s = Json::array(), decode_s = Json::array(),
       total_s = Json::array(), tokens_per_s = Json::array();
  std::vector<double> totals;
  std::vector<engine::OfflineResult> results;
  std::vector<int> sequences_per_step;
  // Run 0 is the untimed warm-up.
  for (int r = 0; r <= flags.reps; ++r) {
    H3_ASSIGN_OR_RETURN(
        const engine::OfflineStats stats,
        engine::GenerateOffline(runner, requests, step_tokens, &results));
    if (r == 0) continue;
    const double total = stats.prefill_seconds + stats.decode_seconds;
    prefill_s.push_back(stats.prefill_seconds);
    decode_s.push_back(stats.decode_seconds);
    total_s.push_back(total);
    totals.push_back(total);
    tokens_per_s.push_back(flags.batch * flags.decode_steps / total);
    sequences_per_step = stats.sequences_per_prefill_step;
  }
  const double median_total = Median(totals);
  return Json{
      {"batch", flags.batch},
      {"prompt_len", flags.prompt_len},
      {"decode_steps", flags.decode_steps},
      {"prefill_chunk", flags.prefill_chunk},
      {"step_tokens", step_tokens},
      {"prefill_steps", sequences_per_step.size()},
      {"sequences_per_prefill_step", sequences_per_step},
      {"method",
       "per run (engine::GenerateOffline): the batch's prompts packed into "
       "steps of step_tokens tokens, each Runner step one forward over every "
       "prompt in it, each prompt sampling its first token greedily on the "
       "backend; then decode_steps steps of one token per sequence, sampling "
       "greedily on the backend (only ids come back); wall clock "
       "(steady_clock) from the first prefill step to the synchronisation "
       "after the last step; one untimed warm-up run first; tokens/s = "
       "batch * decode_steps / total"},
      {"prefill_s", prefill_s},
      {"decode_s", decode_s},
      {"total_s", total_s},
      {"tokens_per_s", tokens_per_s},
      {"median_total_s", median_total},
      {"median_tokens_per_s", flags.batch * flags.decode_steps / median_total},
  };
}

absl::StatusOr<Json> RunLatency(engine::Runner& runner,
                                const EngineBenchFlags& flags) {
  const int32_t vocab =
      static_cast<int32_t>(runner.model().config().vocab_size);
  engine::SequenceMemory& memory = runner.memory();
  const std::vector<int32_t> prompt = RandomTokens(flags.prompt_len, vocab, 1);
  const kernels::SamplingRow greedy{.temperature = 0.0f};
  engine::StepPlan plan;
  engine::StepResult result;
  Json step_ms = Json::array();
  std::vector<double> all_ms;
  for (int r = 0; r <= flags.reps; ++r) {
    H3_ASSIGN_OR_RETURN(const engine::SlotId slot, memory.Acquire());
    absl::Cleanup release = [&] { memory.Release(slot); };
    plan.sequences = {
        {.slot = slot, .tokens = prompt, .sample = true, .sampling = greedy}};
    H3_RETURN_IF_ERROR(runner.Execute(plan, &result));
    int32_t next = result.ids[0];
    Json run = Json::array();
    for (int64_t step = 0; step < flags.decode_steps; ++step) {
      plan.sequences = {{.slot = slot,
                         .tokens = absl::MakeConstSpan(&next, 1),
                         .sample = true,
                         .sampling = greedy}};
      const Clock::time_point start = Clock::now();
      H3_RETURN_IF_ERROR(runner.Execute(plan, &result));
      const double ms = 1e3 * Since(start);
      next = result.ids[0];
      run.push_back(ms);
      if (r > 0) all_ms.push_back(ms);
    }
    if (r > 0) step_ms.push_back(run);  // run 0 is the warm-up
  }
  return Json{
      {"batch", 1},
      {"prompt_len", flags.prompt_len},
      {"decode_steps", flags.decode_steps},
      {"method",
       "one sequence prefilled with prompt_len tokens (untimed), then each "
       "single-token Runner step timed alone (steady_clock, including greedy "
       "sampling on the backend and the copy of the id to the host); one "
       "untimed warm-up run first; median over every step of every timed run"},
      {"step_ms", step_ms},
      {"median_step_ms", Median(all_ms)},
  };
}

absl::StatusOr<Json> WriteRandomModelFile(const EngineBenchFlags& flags) {
  loader::ModelConfig c;
  if (flags.random_shape == "small") {
    c.d_model = 256;
    c.n_layer = 4;
    c.attn_layer_idx = {2};
    c.n_heads = 4;
  } else {
    H3_ASSIGN_OR_RETURN(const loader::Preset* p,
                        loader::FindPreset(flags.random_shape));
    c.d_model = p->d_model;
    c.n_layer = p->n_layer;
    c.attn_layer_idx = p->attn_layer_idx;
    c.n_heads = p->n_heads;
    c.rotary_dim = p->rotary_dim;
  }
  c.head_dim = 1;
  c.d_state = 64;
  c.d_inner = 4 * c.d_model;
  c.vocab_size = 50257;  // GPT-2 BPE
  // Embedding rows: a multiple of 8 (50264), as in the released checkpoints.
  c.padded_vocab_size = (c.vocab_size + 7) / 8 * 8;
  H3_RETURN_IF_ERROR(loader::ValidateConfig(c));
  const Clock::time_point start = Clock::now();
  H3_RETURN_IF_ERROR(testing::WriteRandomModel(c, flags.model));
  return Json{{"wrote", flags.model},
              {"shape", flags.random_shape},
              {"config", Json::parse(loader::ConfigToJson(c))},
              {"seconds", Since(start)}};
}

}  // namespace h3::bench
