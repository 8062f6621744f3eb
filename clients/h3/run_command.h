#ifndef H3_CLIENTS_H3_RUN_COMMAND_H_
#define H3_CLIENTS_H3_RUN_COMMAND_H_

#include "CLI/CLI.hpp"

namespace h3::cli {

// `h3 run --model MODEL.h3 (--prompt TEXT | --prompt-ids 1,2,3)
// [--max-tokens N] [--greedy | --temperature T --top-k K --top-p P
// --min-p P] [--repetition-penalty R] [--seed S] [--ignore-eos]
// [--prefill-chunk N] [--json] [--logits]`: generates offline on the CPU
// engine, without a server.
//
// Plain output streams the generated text to stdout (or, for a model file
// without a tokenizer, prints the generated ids as a JSON array) and the
// timings to stderr. --json prints one object: prompt_ids, generated_ids,
// text (only with a tokenizer; without the end-of-text token), finish_reason
// ("length" or "eos"), timing, and with --logits prompt_last_logits, the
// logits of the vocabulary's vocab_size entries at the last prompt position.
// Generation stops at the tokenizer's end-of-text token unless --ignore-eos.
// Registers the subcommand; the callback stores the exit status (0, or 1
// after printing the error) in *exit_code.
void AddRunCommand(CLI::App& app, int* exit_code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_RUN_COMMAND_H_
