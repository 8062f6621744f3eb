#ifndef H3_TESTS_SUPPORT_SUBPROCESS_H_
#define H3_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace h3::testing {

struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal or not started
  std::string out;     // stdout and stderr, interleaved
};

// Runs argv (argv[0] a path) to completion, killed after `timeout`, and
// collects its output.
RunResult RunCommand(const std::vector<std::string>& argv,
                     std::chrono::seconds timeout = std::chrono::seconds(60));

// Why the Python example client (clients/python) cannot run here, or ""
// when it can: no stubs were generated into `stubs_dir` (empty), or
// /usr/bin/python3 cannot import grpc and google.protobuf.
std::string PythonClientUnavailable(const std::string& stubs_dir);

// A child process whose output is read line by line, for servers under test.
// The destructor kills the child if it still runs. Not thread-safe.
class Subprocess {
 public:
  explicit Subprocess(const std::vector<std::string>& argv);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // Reads output until a line containing `needle` arrives (returns that line)
  // or until `timeout` or end of output (returns "").
  std::string WaitForLine(const std::string& needle,
                          std::chrono::milliseconds timeout);

  // Reads output until the child closes it or `timeout` passes.
  void ReadToEnd(std::chrono::milliseconds timeout);

  // Sends `signal` (0: none) unless the child has already exited, and waits up
  // to `timeout` for the exit; returns the exit code, or -1 when the child had
  // to be killed or died of a signal.
  int Stop(int signal, std::chrono::milliseconds timeout);

  // Everything read so far.
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string output_;
  size_t scanned_ = 0;  // output_ before this offset holds no pending line
};

// Reads `server`'s output (an h3serve) until its line
// "listening: grpc=HOST:PORT ..." and returns HOST:PORT, or "" when none
// comes within `timeout`.
std::string WaitForGrpcAddress(Subprocess& server,
                               std::chrono::milliseconds timeout);

// Starts the h3serve binary `h3serve` on `model` on a free loopback port,
// without metrics, with `flags` added; sets *address to its HOST:PORT, or ""
// when it did not start within 60 s (its output() says why).
std::unique_ptr<Subprocess> StartH3serve(const std::string& h3serve,
                                         const std::string& model,
                                         const std::vector<std::string>& flags,
                                         std::string* address);

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_SUBPROCESS_H_
