#ifndef H3_CLIENTS_H3_HEALTH_COMMAND_H_
#define H3_CLIENTS_H3_HEALTH_COMMAND_H_

#include "CLI/CLI.hpp"

namespace h3::cli {

// `h3 health [--server HOST:PORT] [--timeout SECONDS] [--service NAME]`: one
// grpc.health.v1.Health/Check call, for container health checks and
// scripts. --service "" (the default) asks for the server as a whole;
// h3serve also answers for "h3.v1.TextGeneration".
//
// Prints the serving status the server answered (SERVING, NOT_SERVING, ...)
// on stdout. Exit status: 0 only when it is SERVING; 1 otherwise, with the
// reason on stderr as "h3 health: HOST:PORT: REASON": the status when the
// server answered another one, or "CODE_NAME: message" when the call failed
// (UNAVAILABLE when nothing answers, DEADLINE_EXCEEDED after --timeout,
// NOT_FOUND for a service the server does not know); 2 for a usage error.
// Registers the subcommand on `app`; its callback stores the exit status in
// *exit_code.
void AddHealthCommand(CLI::App& app, int* exit_code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_HEALTH_COMMAND_H_
