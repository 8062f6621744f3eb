#include "bench/engine_table4.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "base/build_info.h"
#include "base/status_macros.h"
#include "engine/devices.h"
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

// Greedy rows for `n` sequences: sampling on the backend, as the server
// does, writing the next tokens into `next`.
struct GreedySampling {
  explicit GreedySampling(std::vector<int32_t>& next)
      : rows(next.size(), kernels::SamplingRow{.temperature = 0.0f}),
        all{rows, next.data(), nullptr} {}
  // The sampling of sequence b alone (a prefill's first token).
  engine::StepSampling One(size_t b) const {
    return {absl::MakeConstSpan(&rows[b], 1), all.ids + b, nullptr};
  }
  std::vector<kernels::SamplingRow> rows;
  engine::StepSampling all;
};

absl::StatusOr<std::unique_ptr<engine::Backend>> MakeBenchBackend(
    const EngineBenchFlags& flags) {
  engine::BackendOptions options;
  options.device = flags.device;
  H3_ASSIGN_OR_RETURN(options.weight_type,
                      engine::ParseWeightType(flags.dtype));
  return engine::MakeBackend(options);
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

struct Table4Run {
  double prefill_s = 0;
  double decode_s = 0;
};

// One run of RunTable4 over `sequences`, which it resets first (untimed).
absl::StatusOr<Table4Run> OneTable4Run(
    engine::Model& model, const EngineBenchFlags& flags,
    const std::vector<engine::SequenceState*>& sequences,
    const std::vector<std::vector<int32_t>>& prompts) {
  for (engine::SequenceState* s : sequences) {
    H3_RETURN_IF_ERROR(model.ResetSequence(*s));
  }
  H3_RETURN_IF_ERROR(model.backend().Synchronize());
  std::vector<int32_t> next(flags.batch);
  const GreedySampling greedy(next);
  Table4Run run;
  const Clock::time_point start = Clock::now();
  for (int64_t b = 0; b < flags.batch; ++b) {
    const engine::StepSampling first = greedy.One(b);
    H3_RETURN_IF_ERROR(
        model.Prefill(*sequences[b], prompts[b], nullptr, &first));
  }
  run.prefill_s = Since(start);
  const Clock::time_point decode_start = Clock::now();
  for (int64_t step = 0; step < flags.decode_steps; ++step) {
    H3_RETURN_IF_ERROR(model.Decode(sequences, next, nullptr, &greedy.all));
  }
  H3_RETURN_IF_ERROR(model.backend().Synchronize());
  run.decode_s = Since(decode_start);
  return run;
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

absl::StatusOr<Json> RunTable4(engine::Model& model,
                               const EngineBenchFlags& flags) {
  const loader::ModelConfig& config = model.config();
  const int32_t vocab = static_cast<int32_t>(config.vocab_size);
  std::vector<std::unique_ptr<engine::SequenceState>> owned;
  std::vector<engine::SequenceState*> sequences;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t b = 0; b < flags.batch; ++b) {
    H3_ASSIGN_OR_RETURN(std::unique_ptr<engine::SequenceState> s,
                        model.NewSequence());
    sequences.push_back(s.get());
    owned.push_back(std::move(s));
    prompts.push_back(RandomTokens(flags.prompt_len, vocab, 1000 + b));
  }
  Json prefill_s = Json::array(), decode_s = Json::array(),
       total_s = Json::array(), tokens_per_s = Json::array();
  std::vector<double> totals;
  // Run 0 is the untimed warm-up.
  for (int r = 0; r <= flags.reps; ++r) {
    H3_ASSIGN_OR_RETURN(Table4Run run,
                        OneTable4Run(model, flags, sequences, prompts));
    if (r == 0) continue;
    const double total = run.prefill_s + run.decode_s;
    prefill_s.push_back(run.prefill_s);
    decode_s.push_back(run.decode_s);
    total_s.push_back(total);
    totals.push_back(total);
    tokens_per_s.push_back(flags.batch * flags.decode_steps / total);
  }
  const double median_total = Median(totals);
  return Json{
      {"batch", flags.batch},
      {"prompt_len", flags.prompt_len},
      {"decode_steps", flags.decode_steps},
      {"prefill_chunk", flags.prefill_chunk},
      {"method",
       "per run: each sequence prefilled by one Model::Prefill call, which "
       "samples its first token greedily on the backend, then decode_steps "
       "batched Model::Decode steps, each sampling greedily on the backend "
       "(only ids come back); wall clock (steady_clock) from "
       "the first prefill to the synchronisation after the last step; one "
       "untimed warm-up run first; tokens/s = batch * decode_steps / total"},
      {"prefill_s", prefill_s},
      {"decode_s", decode_s},
      {"total_s", total_s},
      {"tokens_per_s", tokens_per_s},
      {"median_total_s", median_total},
      {"median_tokens_per_s", flags.batch * flags.decode_steps / median_total},
  };
}

absl::StatusOr<Json> RunLatency(engine::Model& model,
                                const EngineBenchFlags& flags) {
  const loader::ModelConfig& config = model.config();
  const int32_t vocab = static_cast<int32_t>(config.vocab_size);
  H3_ASSIGN_OR_RETURN(std::unique_ptr<engine::SequenceState> seq,
                      model.NewSequence());
  engine::SequenceState* batch[] = {seq.get()};
  const std::vector<int32_t> prompt = RandomTokens(flags.prompt_len, vocab, 1);
  std::vector<int32_t> next(1);
  const GreedySampling greedy(next);
  Json step_ms = Json::array();
  std::vector<double> all_ms;
  for (int r = 0; r <= flags.reps; ++r) {
    H3_RETURN_IF_ERROR(model.ResetSequence(*seq));
    const engine::StepSampling first = greedy.One(0);
    H3_RETURN_IF_ERROR(model.Prefill(*seq, prompt, nullptr, &first));
    H3_RETURN_IF_ERROR(model.backend().Synchronize());
    Json run = Json::array();
    for (int64_t step = 0; step < flags.decode_steps; ++step) {
      const Clock::time_point start = Clock::now();
      H3_RETURN_IF_ERROR(model.Decode(batch, next, nullptr, &greedy.all));
      const double ms = 1e3 * Since(start);
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
       "Model::Decode step timed alone (steady_clock, including greedy "
       "sampling on the backend and the copy of the id to the host); one "
       "untimed warm-up run first; "
       "median over every step of every timed run"},
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
