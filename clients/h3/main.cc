// h3: the command-line tool of h3serve.
#include "CLI/CLI.hpp"
#include "base/build_info.h"
#include "clients/h3/convert_command.h"
#include "clients/h3/devices_command.h"
#include "clients/h3/inspect_command.h"
#if H3_WITH_TOKENIZER
#include "clients/h3/run_command.h"
#include "clients/h3/tokenize_command.h"
#endif
#if H3_WITH_SERVER_COMMANDS
#include "clients/h3/bench_command.h"
#include "clients/h3/generate_command.h"
#include "clients/h3/health_command.h"
#include "clients/h3/server_info_command.h"
#endif

namespace {

// The exit status of a command line that does not parse (an unknown flag, a
// bad value, a missing argument), as for other Unix tools.
constexpr int kUsageExit = 2;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"h3: the command-line tool of h3serve.", "h3"};
  app.set_version_flag("--version", h3::VersionLine("h3"));
  app.require_subcommand(1);
  int exit_code = 0;
  h3::cli::AddDevicesCommand(app, &exit_code);
  h3::cli::AddConvertCommand(app, &exit_code);
  h3::cli::AddInspectCommand(app, &exit_code);
#if H3_WITH_TOKENIZER  // a build without RE2/sentencepiece has no tokenizer
  h3::cli::AddRunCommand(app, &exit_code);
  h3::cli::AddTokenizeCommand(app, &exit_code);
#endif
#if H3_WITH_SERVER_COMMANDS  // a build without gRPC has no server commands
  h3::cli::AddGenerateCommand(app, &exit_code);
  h3::cli::AddServerInfoCommand(app, &exit_code);
  h3::cli::AddBenchCommand(app, &exit_code);
  h3::cli::AddHealthCommand(app, &exit_code);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end parsing with status 0.
    return app.exit(e) == 0 ? 0 : kUsageExit;
  }
  return exit_code;
}
