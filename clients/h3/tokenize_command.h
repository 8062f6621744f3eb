#ifndef H3_CLIENTS_H3_TOKENIZE_COMMAND_H_
#define H3_CLIENTS_H3_TOKENIZE_COMMAND_H_

#include "CLI/CLI.hpp"

namespace h3::cli {

// `h3 tokenize (--tokenizer PATH | --model MODEL.h3) [TEXT | -]`: prints the
// ids of TEXT (or of standard input with `-`) as a JSON array; `--decode
// 1,2,3` prints the text of the ids instead. PATH is anything
// LoadTokenizerFromPath accepts; MODEL.h3 a model file with an embedded
// tokenizer (h3 convert --tokenizer), refused with a message saying how to
// embed one when it has none.
// Registers the subcommand on `app`; when the user selects it, the callback
// stores the exit status (0, or 1 after printing the error) in *exit_code.
void AddTokenizeCommand(CLI::App& app, int* exit_code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_TOKENIZE_COMMAND_H_
