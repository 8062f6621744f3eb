#ifndef H3_CLIENTS_H3_SERVER_INFO_COMMAND_H_
#define H3_CLIENTS_H3_SERVER_INFO_COMMAND_H_

#include "CLI/CLI.hpp"

namespace h3::cli {

// `h3 server-info --server HOST:PORT`: asks a running h3serve for its
// ServerInfo and its health status. Exit status 0 when the server answered,
// 1 when it could not be reached or answered an error. Registers the
// subcommand on `app`; its callback stores the exit status in *exit_code.
void AddServerInfoCommand(CLI::App& app, int* exit_code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_SERVER_INFO_COMMAND_H_
