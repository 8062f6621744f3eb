#ifndef H3_CLIENTS_H3_INTERRUPT_H_
#define H3_CLIENTS_H3_INTERRUPT_H_

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

#include "grpcpp/client_context.h"

namespace h3::cli {

// Turns Ctrl-C (SIGINT) into ClientContext::TryCancel for the lifetime of the
// object, so that a blocking call or stream on `context` ends with CANCELLED
// instead of the process dying with the call open.
//
// Installs a SIGINT handler that only wakes a thread of this object's, which
// cancels the call; the destructor restores the previous handler. A SIGINT
// that is ignored (as in a background job) stays ignored. At most one object
// may exist at a time. `context` must outlive it. Not copyable.
class CancelOnInterrupt {
 public:
  explicit CancelOnInterrupt(grpc::ClientContext* context);
  // The same for work that is not one call (many calls at once): the first
  // SIGINT runs `on_interrupt` on a thread of this object's. It must be
  // thread-safe and may run until the destructor joins that thread.
  explicit CancelOnInterrupt(std::function<void()> on_interrupt);
  ~CancelOnInterrupt();
  CancelOnInterrupt(const CancelOnInterrupt&) = delete;
  CancelOnInterrupt& operator=(const CancelOnInterrupt&) = delete;

  // True once a SIGINT has cancelled the call.
  bool interrupted() const { return interrupted_.load(); }

 private:
  void Watch();

  std::function<void()> on_interrupt_;
  int pipe_[2] = {-1, -1};  // the handler writes, the watcher reads
  struct sigaction previous_ {};
  std::atomic<bool> interrupted_{false};
  std::thread watcher_;
};

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_INTERRUPT_H_
