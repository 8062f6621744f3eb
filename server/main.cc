// h3serve: serves a hybrid H3 language model over gRPC.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "base/build_info.h"
#include "server/server.h"

namespace {

// Blocks SIGINT and SIGTERM in this thread and every thread started after it,
// so that only the thread calling sigwait receives them.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  h3::server::ServerOptions options;
  double grace_seconds = 30;

  CLI::App app{
      "h3serve: an inference server for hybrid H3 language models.\n"
      "Serves h3.v1.TextGeneration, grpc.health.v1.Health and server "
      "reflection over gRPC, and Prometheus metrics over HTTP.",
      "h3serve"};
  app.set_version_flag("--version", h3::VersionLine("h3serve"));
  app.add_option("--host", options.host, "Address to listen on")
      ->capture_default_str();
  app.add_option("--port", options.port, "gRPC port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--metrics-port", options.metrics_port,
                 "Port of the Prometheus /metrics endpoint (0: any free "
                 "port, -1: none)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--shutdown-grace", grace_seconds,
                 "Seconds that requests in flight get to finish after "
                 "SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const sigset_t stop_signals = BlockStopSignals();
  auto server = h3::server::Server::Start(options);
  if (!server.ok()) {
    std::cerr << "h3serve: " << server.status().message() << std::endl;
    return 1;
  }
  std::cout << h3::VersionLine("h3serve") << "\n"
            << "listening: grpc=" << options.host << ":" << (*server)->port();
  if ((*server)->metrics_port() >= 0) {
    std::cout << " metrics=http://" << options.host << ":"
              << (*server)->metrics_port() << "/metrics";
  }
  std::cout << "\n"
            << "No model is loaded: this build answers health checks "
               "(NOT_SERVING), reflection and GetServerInfo; model loading "
               "and generation are not built yet. Ctrl-C stops.\n"
            << std::flush;

  std::thread signal_waiter([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    std::cout << "h3serve: " << (signal == SIGINT ? "SIGINT" : "SIGTERM")
              << ", shutting down" << std::endl;
    (*server)->Shutdown(
        std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000)));
  });
  (*server)->Wait();
  signal_waiter.join();
  return 0;
}
