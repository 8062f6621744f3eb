#ifndef H3_CLIENTS_H3_GENERATE_COMMAND_H_
#define H3_CLIENTS_H3_GENERATE_COMMAND_H_

#include "CLI/CLI.hpp"

namespace h3::cli {

// `h3 generate [--server HOST:PORT] (PROMPT | --prompt-ids 1,2,3)
// [--max-tokens N] [--min-tokens N] [--greedy | --temperature T --top-k K
// --top-p P --min-p P] [--repetition-penalty R] [--presence-penalty X]
// [--frequency-penalty X] [--seed S] [--stop STR]... [--stop-token-id ID]...
// [--ignore-eos] [--logprobs N] [--request-id ID] [--timeout SECONDS]
// [--unary] [--json]`: generates through a running h3serve, with the
// streaming Generate call (or Complete with --unary).
//
// The request carries only the fields given on the command line; the server
// applies its defaults to the rest and validates everything. --greedy sends
// temperature 0; --logprobs -1 asks for none, 0 for each token's own, 1..20
// also for that many alternatives.
//
// Plain output streams the text to stdout as it arrives, then a newline (the
// generated ids as a JSON array instead when no text came, as from a model
// without a tokenizer), and a one-line summary to stderr. --json prints one
// object at the end: request_id, generated_ids, text, finish_reason
// (length, stop, eos, cancelled, deadline), stop_string or stop_token_id when
// one matched, usage, and logprobs when asked for.
//
// Exit status: 0 on success; 1 after a gRPC error, printed as
// "h3 generate: CODE_NAME: message", or when the answer ended without a
// finish reason; 2 for a usage error; 130 when Ctrl-C cancelled the call.
// Registers the subcommand on `app`; its callback stores the exit status in
// *exit_code.
void AddGenerateCommand(CLI::App& app, int* exit_code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_GENERATE_COMMAND_H_
