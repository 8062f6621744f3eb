#include "clients/h3/interrupt.h"

#include <signal.h>

namespace h3::cli {
namespace {

sigset_t InterruptSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

CancelOnInterrupt::CancelOnInterrupt(grpc::ClientContext* context)
    : context_(context) {
  const sigset_t set = InterruptSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  watcher_ = std::thread([this] { Watch(); });
}

CancelOnInterrupt::~CancelOnInterrupt() {
  // Wake the watcher with a SIGINT of its own; done_ tells it not to cancel.
  done_.store(true);
  pthread_kill(watcher_.native_handle(), SIGINT);
  watcher_.join();
}

void CancelOnInterrupt::Watch() {
  const sigset_t set = InterruptSet();
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  if (done_.load()) return;
  interrupted_.store(true);
  context_->TryCancel();
}

}  // namespace h3::cli
