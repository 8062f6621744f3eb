#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace h3::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Starts argv with stdout and stderr on a pipe; returns the pid (or -1) and
// the pipe's read end in *fd.
pid_t Spawn(const std::vector<std::string>& argv, int* fd) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) !=
      0) {
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  *fd = pipe_fds[0];
  return pid;
}

enum class ReadResult { kData, kTimeout, kEnd };

// Appends what is readable within `timeout` to *out.
ReadResult ReadSome(int fd, std::string* out,
                    std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) {
    return ReadResult::kTimeout;
  }
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n <= 0) return ReadResult::kEnd;
  out->append(buf, n);
  return ReadResult::kData;
}

int DecodeStatus(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

RunResult RunCommand(const std::vector<std::string>& argv,
                     std::chrono::seconds timeout) {
  Subprocess process(argv);
  RunResult result;
  if (!process.started()) return result;
  process.ReadToEnd(timeout);
  result.exit_code = process.Stop(0, std::chrono::milliseconds(5000));
  result.out = process.output();
  return result;
}

Subprocess::Subprocess(const std::vector<std::string>& argv) {
  pid_ = Spawn(argv, &fd_);
}

Subprocess::~Subprocess() {
  if (pid_ > 0) Stop(SIGKILL, std::chrono::milliseconds(5000));
  if (fd_ >= 0) close(fd_);
}

std::string Subprocess::WaitForLine(const std::string& needle,
                                    std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    size_t end;
    while ((end = output_.find('\n', scanned_)) != std::string::npos) {
      std::string line = output_.substr(scanned_, end - scanned_);
      scanned_ = end + 1;
      if (line.find(needle) != std::string::npos) return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0 ||
        ReadSome(fd_, &output_, left) == ReadResult::kEnd) {
      return "";
    }
  }
}

void Subprocess::ReadToEnd(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (ReadSome(fd_, &output_, left) == ReadResult::kEnd) return;
  }
}

int Subprocess::Stop(int signal, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  // An exited child is not signalled: its pid may be reused by then.
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == 0) {
    kill(pid_, signal);
    const auto deadline = Clock::now() + timeout;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        pid_ = -1;
        return -1;
      }
      ReadSome(fd_, &output_, std::chrono::milliseconds(20));
    }
  }
  pid_ = -1;
  // Collect what the child wrote before it exited.
  while (ReadSome(fd_, &output_, std::chrono::milliseconds(0)) ==
         ReadResult::kData) {
  }
  return DecodeStatus(status);
}

std::string WaitForGrpcAddress(Subprocess& server,
                               std::chrono::milliseconds timeout) {
  const std::string line = server.WaitForLine("listening:", timeout);
  const std::string key = "grpc=";
  const size_t at = line.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size();
  return line.substr(begin, line.find(' ', begin) - begin);
}

std::string PythonClientUnavailable(const std::string& stubs_dir) {
  if (stubs_dir.empty()) {
    return "no grpc_python_plugin when configured: no Python stubs";
  }
  const RunResult import =
      RunCommand({"/usr/bin/python3", "-c", "import grpc, google.protobuf"});
  if (import.exit_code != 0) {
    return "python3-grpcio or python3-protobuf is not installed: " + import.out;
  }
  return "";
}

std::unique_ptr<Subprocess> StartH3serve(const std::string& h3serve,
                                         const std::string& model,
                                         const std::vector<std::string>& flags,
                                         std::string* address) {
  std::vector<std::string> argv = {
      h3serve, "--model",        model, "--host",      "127.0.0.1", "--port",
      "0",     "--metrics-port", "-1",  "--http-port", "-1"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto server = std::make_unique<Subprocess>(argv);
  *address = WaitForGrpcAddress(*server, std::chrono::seconds(60));
  return server;
}

}  // namespace h3::testing
