#ifndef H3_CLIENTS_H3_BENCH_COMMAND_H_
#define H3_CLIENTS_H3_BENCH_COMMAND_H_

#include "CLI/CLI.hpp"

namespace h3::cli {

// `h3 bench [--server HOST:PORT] [--backend grpc|openai] [--base-url URL]
// [--num-prompts N] [--request-rate R]
// [--burstiness B] [--max-concurrency N] [--num-warmups N] [--time-limit S]
// [--dataset random|FILE.jsonl] [--input-len N] [--output-len N]
// [--random-range-ratio R] [--prefix-len N] [--num-prefixes N]
// [--temperature T] [--seed S] [--json OUT] [--progress]`: a load generator
// for a running h3serve, measuring throughput and latency on the client
// side as vLLM's serving benchmark does.
//
// Front end: --backend grpc (the default) sends Generate calls to
// --server; --backend openai sends streamed POST /v1/completions to
// --base-url (h3serve's OpenAI-compatible API), asking --server for the
// model and its vocabulary first either way, so that the same load measures
// both front ends. Failures are counted by gRPC code, or HTTP_<status>.
//
// Prompts: `random` (the default) draws token ids uniformly from the
// server's vocabulary (GetModelInfo) without its eos and bos ids, so that
// input lengths are exact; --prefix-len N starts every prompt with one of
// --num-prefixes shared random prefixes of N tokens (the shared-prefix
// scenario). Any other --dataset value is a file of JSON lines
// {"prompt": "text", "output_len": N} sent as text. Every request asks for
// exactly its output length (min = max new tokens, eos ignored).
//
// Load: requests arrive at --request-rate per second (gamma-distributed gaps
// of shape --burstiness: Poisson at 1; `inf`, the default, sends all at
// once), at most --max-concurrency at a time, after --num-warmups
// unmeasured requests; --time-limit stops the run early.
//
// Prints a table to stdout (and a progress bar to stderr when it is a
// terminal or with --progress); --json OUT also writes every number, the
// options, the server's model and build, the client's build and the machine.
//
// Exit status: 0 after a run, however many requests failed (they are
// counted by gRPC code); 1 when the server cannot be asked for its model,
// or a file cannot be read or written; 2 for a usage error; 130 after Ctrl-C,
// which cancels the calls in flight and still reports what finished.
// Registers the subcommand on `app`; its callback stores the exit status in
// *exit_code.
void AddBenchCommand(CLI::App& app, int* exit_code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_BENCH_COMMAND_H_
