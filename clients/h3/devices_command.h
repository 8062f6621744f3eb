#ifndef H3_CLIENTS_H3_DEVICES_COMMAND_H_
#define H3_CLIENTS_H3_DEVICES_COMMAND_H_

#include "CLI/CLI.hpp"

namespace h3::cli {

// `h3 devices`: lists the GPUs the CUDA runtime sees and, unless
// --no-self-test, runs a kernel on each to prove that this build computes
// correctly there. Registers the subcommand on `app`; when the user selects
// it, the callback stores the exit status in *exit_code.
void AddDevicesCommand(CLI::App& app, int* exit_code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_DEVICES_COMMAND_H_
