#include "tests/support/profile_checks.h"

#include <chrono>
#include <cstring>
#include <map>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "base/status_macros.h"
#include "gtest/gtest.h"

namespace h3::testing {
namespace {

std::vector<int32_t> Tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) {
    t[i] = static_cast<int32_t>((seed * 7919 + i * 104729) % vocab);
  }
  return t;
}

// Executes `plan` as one measured step of *out.
absl::Status Step(engine::Runner& runner, const engine::StepPlan& plan,
                  ProfiledSteps* out) {
  engine::StepResult result;
  const auto start = std::chrono::steady_clock::now();
  H3_RETURN_IF_ERROR(runner.Execute(plan, &result));
  out->wall_ms += std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  ++out->steps;
  out->logits.insert(out->logits.end(), result.logits.begin(),
                     result.logits.end());
  out->ids.insert(out->ids.end(), result.ids.begin(), result.ids.end());
  engine::Profiler* profiler = runner.model().backend().profiler();
  if (profiler != nullptr) H3_RETURN_IF_ERROR(profiler->Collect());
  return absl::OkStatus();
}

absl::StatusOr<ProfiledSteps> Finish(engine::Backend& backend,
                                     ProfiledSteps run) {
  if (backend.profiler() != nullptr) run.totals = backend.profiler()->Totals();
  H3_RETURN_IF_ERROR(backend.EnableProfiler(false));
  return run;
}

const kernels::SamplingRow kGreedy{.temperature = 0.0f};

}  // namespace

absl::StatusOr<ProfiledSteps> RunDecode(engine::Runner& runner, int batch,
                                        int64_t context, int64_t steps,
                                        bool profile) {
  engine::Backend& backend = runner.model().backend();
  const int64_t vocab = runner.model().config().vocab_size;
  std::vector<engine::SlotId> slots;
  absl::Cleanup release = [&] {
    (void)backend.EnableProfiler(false);
    for (engine::SlotId slot : slots) runner.memory().Release(slot);
  };
  engine::StepPlan plan;
  engine::StepResult result;
  for (int b = 0; b < batch; ++b) {
    H3_ASSIGN_OR_RETURN(const engine::SlotId slot, runner.memory().Acquire());
    slots.push_back(slot);
    const std::vector<int32_t> tokens = Tokens(context, vocab, 10 + b);
    plan.sequences = {{.slot = slot, .tokens = tokens}};
    H3_RETURN_IF_ERROR(runner.Execute(plan, &result));
  }
  H3_RETURN_IF_ERROR(backend.EnableProfiler(profile));
  ProfiledSteps run;
  std::vector<int32_t> next = Tokens(batch, vocab, 3);
  for (int64_t s = 0; s < steps; ++s) {
    plan.sequences.clear();
    for (int b = 0; b < batch; ++b) {
      plan.sequences.push_back({.slot = slots[b],
                                .tokens = absl::MakeConstSpan(&next[b], 1),
                                .sample = true,
                                .sampling = kGreedy,
                                .logits = true});
    }
    H3_RETURN_IF_ERROR(Step(runner, plan, &run));
    std::copy(run.ids.end() - batch, run.ids.end(), next.begin());
  }
  return Finish(backend, std::move(run));
}

absl::StatusOr<ProfiledSteps> RunPrefill(engine::Runner& runner, int64_t length,
                                         bool profile) {
  engine::Backend& backend = runner.model().backend();
  H3_ASSIGN_OR_RETURN(const engine::SlotId slot, runner.memory().Acquire());
  absl::Cleanup release = [&] {
    (void)backend.EnableProfiler(false);
    runner.memory().Release(slot);
  };
  const std::vector<int32_t> tokens =
      Tokens(length, runner.model().config().vocab_size, 5);
  engine::StepPlan plan;
  plan.sequences = {{.slot = slot,
                     .tokens = tokens,
                     .sample = true,
                     .sampling = kGreedy,
                     .logits = true}};
  H3_RETURN_IF_ERROR(backend.EnableProfiler(profile));
  ProfiledSteps run;
  H3_RETURN_IF_ERROR(Step(runner, plan, &run));
  return Finish(backend, std::move(run));
}

ExpectedOps DecodeOps() {
  const std::vector<std::string> layer = {"ln_1", "qkv_linear",   "out_linear",
                                          "ln_2", "mlp_fc1_gelu", "mlp_fc2"};
  ExpectedOps ops{
      layer,
      layer,
      {"upload", "embedding", "ln_f", "lm_head", "sample", "ids_to_host"},
      {"logits_to_host"}};
  ops.h3.push_back("h3_step");
  ops.attention.push_back("attention_decode");
  return ops;
}

ExpectedOps PrefillOps() {
  ExpectedOps ops = DecodeOps();
  ops.h3.back() = "h3_prefill";
  ops.attention.back() = "attention_prefill";
  ops.model.push_back("gather_rows");  // the last row to the LM head's row 0
  return ops;
}

void ExpectBreakdown(const ProfiledSteps& run, const ExpectedOps& ops,
                     int h3_layers, int attention_layers, int sequences) {
  std::map<std::pair<std::string, std::string>, const engine::OpTotal*> by;
  double sum = 0;
  for (const engine::OpTotal& t : run.totals) {
    by[{t.layer_type, t.name}] = &t;
    EXPECT_GE(t.ms, 0) << t.layer_type << " " << t.name;
    sum += t.ms;
  }
  EXPECT_LE(sum, run.wall_ms);
  auto expect = [&](const char* type, const std::vector<std::string>& names,
                    int64_t calls) {
    for (const std::string& name : names) {
      auto it = by.find({type, name});
      if (it == by.end()) {
        ADD_FAILURE() << "no range " << type << " " << name;
        continue;
      }
      EXPECT_EQ(it->second->calls, calls) << type << " " << name;
      by.erase(it);
    }
  };
  expect("h3", ops.h3, int64_t{h3_layers} * run.steps);
  expect("attention", ops.attention, int64_t{attention_layers} * run.steps);
  expect("model", ops.model, run.steps);
  expect("model", ops.per_sequence, int64_t{sequences} * run.steps);
  // What is left: ranges nested in an expected one.
  for (const auto& [key, total] : by) {
    const std::string outer = key.second.substr(0, key.second.find('/'));
    EXPECT_NE(outer, key.second)
        << "unexpected range " << key.first << " " << key.second;
  }
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace h3::testing
