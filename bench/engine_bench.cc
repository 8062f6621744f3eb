// h3_engine_bench: times the CPU engine's prefill and batched decode on one
// model file and prints JSON with every repetition. Driven by
// bench/engine_bench.py, which runs the PyTorch baseline beside it.
//
//   h3_engine_bench --model M.h3 [--what both|prefill|decode] [--reps 5]
//       [--prompt-len 512] [--prefill-chunk 1024]
//       [--batch 1] [--decode-context 128] [--decode-steps 32]
//
// Prefill: one sequence, --prompt-len tokens from position 0, logits of the
// last token; a fresh sequence each repetition. Decode: --batch sequences,
// each first prefilled with --decode-context tokens (untimed), then
// --decode-steps batched steps (timed; logits of every sequence each step).
// One untimed warm-up of each precedes the repetitions (it computes the
// per-length kernel spectra and grows the scratch buffers).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "base/parallel.h"
#include "base/status_macros.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "loader/model_file.h"
#include "nlohmann/json.hpp"

namespace h3 {
namespace {

struct Flags {
  std::string model;
  std::string what = "both";
  int64_t prompt_len = 512;
  int64_t decode_context = 128;
  int64_t decode_steps = 32;
  int64_t batch = 1;
  int reps = 5;
  int64_t prefill_chunk = 1024;
};

using Clock = std::chrono::steady_clock;

std::vector<int32_t> RandomTokens(int64_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = pick(rng);
  return tokens;
}

// Seconds of one prefill of `tokens` into a fresh sequence.
absl::StatusOr<double> TimePrefill(engine::Model& model,
                                   const std::vector<int32_t>& tokens,
                                   std::vector<float>& logits) {
  H3_ASSIGN_OR_RETURN(std::unique_ptr<engine::SequenceState> seq,
                      model.NewSequence());
  const Clock::time_point start = Clock::now();
  H3_RETURN_IF_ERROR(model.Prefill(*seq, tokens, logits.data()));
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Seconds of `steps` batched decode steps after an untimed prefill of each
// sequence.
absl::StatusOr<double> TimeDecode(engine::Model& model, const Flags& flags,
                                  int32_t vocab, std::vector<float>& logits) {
  std::vector<std::unique_ptr<engine::SequenceState>> seqs;
  std::vector<engine::SequenceState*> batch;
  for (int64_t b = 0; b < flags.batch; ++b) {
    H3_ASSIGN_OR_RETURN(std::unique_ptr<engine::SequenceState> seq,
                        model.NewSequence());
    batch.push_back(seq.get());
    seqs.push_back(std::move(seq));
    H3_RETURN_IF_ERROR(model.Prefill(
        *batch.back(), RandomTokens(flags.decode_context, vocab, 100 + b),
        logits.data()));
  }
  std::vector<int32_t> next = RandomTokens(flags.batch, vocab, 7);
  const Clock::time_point start = Clock::now();
  for (int64_t step = 0; step < flags.decode_steps; ++step) {
    H3_RETURN_IF_ERROR(model.Decode(batch, next, logits.data()));
    // The next tokens: argmax of each sequence's logits, as greedy decoding
    // would pick them (keeps the work data-dependent, as in serving).
    const int64_t row = model.config().padded_vocab_size;
    for (int64_t b = 0; b < flags.batch; ++b) {
      const float* x = logits.data() + b * row;
      next[b] = static_cast<int32_t>(std::max_element(x, x + vocab) - x);
    }
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Status Run(const Flags& flags) {
  H3_ASSIGN_OR_RETURN(std::unique_ptr<loader::ModelFile> file,
                      loader::ModelFile::Open(flags.model));
  const loader::ModelConfig& config = file->config();
  H3_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::Model> model,
      engine::Model::Load(
          *file, engine::MakeCpuBackend(),
          {.prefill_chunk = flags.prefill_chunk,
           .max_sequence_length = std::max(
               flags.prompt_len, flags.decode_context + flags.decode_steps)}));
  const int32_t vocab = static_cast<int32_t>(config.vocab_size);
  std::vector<float> logits(flags.batch * config.padded_vocab_size);
  const std::vector<int32_t> prompt = RandomTokens(flags.prompt_len, vocab, 1);

  nlohmann::ordered_json prefill_s = nlohmann::json::array(),
                         decode_s = nlohmann::json::array();
  if (flags.what != "decode") {
    // The first, untimed, is the warm-up.
    for (int r = 0; r <= flags.reps; ++r) {
      H3_ASSIGN_OR_RETURN(double s, TimePrefill(*model, prompt, logits));
      if (r > 0) prefill_s.push_back(s);
    }
  }
  if (flags.what != "prefill") {
    for (int r = 0; r <= flags.reps; ++r) {
      H3_ASSIGN_OR_RETURN(double s, TimeDecode(*model, flags, vocab, logits));
      if (r > 0) decode_s.push_back(s);
    }
  }
  nlohmann::ordered_json out = {
      {"engine", "h3serve-cpu"},
      {"threads", NumThreads()},
      {"prompt_len", flags.prompt_len},
      {"prefill_chunk", flags.prefill_chunk},
      {"batch", flags.batch},
      {"decode_context", flags.decode_context},
      {"decode_steps", flags.decode_steps},
      {"prefill_s", prefill_s},
      {"decode_s", decode_s},
  };
  std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

}  // namespace
}  // namespace h3

int main(int argc, char** argv) {
  CLI::App app{"Times the CPU engine's prefill and decode (JSON on stdout)",
               "h3_engine_bench"};
  h3::Flags flags;
  app.add_option("--model", flags.model, "The model file")->required();
  app.add_option("--what", flags.what)
      ->check(CLI::IsMember({"both", "prefill", "decode"}));
  app.add_option("--prompt-len", flags.prompt_len)->check(CLI::PositiveNumber);
  app.add_option("--decode-context", flags.decode_context)
      ->check(CLI::PositiveNumber);
  app.add_option("--decode-steps", flags.decode_steps)
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", flags.batch)->check(CLI::PositiveNumber);
  app.add_option("--reps", flags.reps)->check(CLI::PositiveNumber);
  app.add_option("--prefill-chunk", flags.prefill_chunk)
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const absl::Status status = h3::Run(flags);
  if (!status.ok()) {
    std::cerr << "h3_engine_bench: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
