#include "clients/h3/interrupt.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <utility>

namespace h3::cli {
namespace {

constexpr char kInterrupted = 'i';
constexpr char kDone = 'd';

// The write end of the live object's pipe, for the handler.
std::atomic<int> interrupt_fd{-1};

// Runs on whichever thread the kernel picks (gRPC's and OpenBLAS's threads
// included), so it does nothing but an async-signal-safe write.
void OnInterrupt(int) {
  const int saved_errno = errno;
  const int fd = interrupt_fd.load();
  if (fd >= 0) (void)!write(fd, &kInterrupted, 1);
  errno = saved_errno;
}

}  // namespace

CancelOnInterrupt::CancelOnInterrupt(grpc::ClientContext* context)
    : CancelOnInterrupt([context] { context->TryCancel(); }) {}

CancelOnInterrupt::CancelOnInterrupt(std::function<void()> on_interrupt)
    : on_interrupt_(std::move(on_interrupt)) {
  struct sigaction current {};
  if (sigaction(SIGINT, nullptr, &current) != 0 ||
      current.sa_handler == SIG_IGN || pipe2(pipe_, O_CLOEXEC) != 0) {
    return;
  }
  interrupt_fd.store(pipe_[1]);
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &previous_);
  watcher_ = std::thread([this] { Watch(); });
}

CancelOnInterrupt::~CancelOnInterrupt() {
  if (!watcher_.joinable()) return;
  sigaction(SIGINT, &previous_, nullptr);
  interrupt_fd.store(-1);
  (void)!write(pipe_[1], &kDone, 1);
  watcher_.join();
  close(pipe_[0]);
  close(pipe_[1]);
}

void CancelOnInterrupt::Watch() {
  char byte = 0;
  while (read(pipe_[0], &byte, 1) < 0 && errno == EINTR) {
  }
  if (byte != kInterrupted) return;
  interrupted_.store(true);
  on_interrupt_();
}

}  // namespace h3::cli
