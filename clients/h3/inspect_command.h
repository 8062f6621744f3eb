#ifndef H3_CLIENTS_H3_INSPECT_COMMAND_H_
#define H3_CLIENTS_H3_INSPECT_COMMAND_H_

#include "CLI/CLI.hpp"

namespace h3::cli {

// `h3 inspect MODEL.h3 [--json]`: prints a model file's format version,
// config, parameter count, dtype and tokenizer. The JSON form has the keys
// format_version, d_model, n_layer, attn_layer_idx, n_heads, head_dim,
// d_state, d_inner, vocab_size, padded_vocab_size, rotary_dim,
// layer_norm_epsilon, dtype, parameters, source, tokenizer. Registers the
// subcommand; the callback stores the exit status in *exit_code.
void AddInspectCommand(CLI::App& app, int* exit_code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_INSPECT_COMMAND_H_
