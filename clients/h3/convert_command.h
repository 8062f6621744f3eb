#ifndef H3_CLIENTS_H3_CONVERT_COMMAND_H_
#define H3_CLIENTS_H3_CONVERT_COMMAND_H_

#include "CLI/CLI.hpp"

namespace h3::cli {

// `h3 convert CHECKPOINT -o MODEL.h3 [--preset P] [--n-heads N]
// [--rotary-dim N] [--vocab-size N] [--dtype fp32|fp16|bf16]
// [--tokenizer PATH]`: converts a torch.save checkpoint or a safetensors file
// into a model file. Progress on stderr (a bar on a terminal, else one
// summary line). Registers the subcommand on `app`; when selected, the
// callback stores the exit status (0, or 1 after printing the error) in
// *exit_code.
void AddConvertCommand(CLI::App& app, int* exit_code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_CONVERT_COMMAND_H_
