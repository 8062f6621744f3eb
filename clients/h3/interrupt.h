#ifndef H3_CLIENTS_H3_INTERRUPT_H_
#define H3_CLIENTS_H3_INTERRUPT_H_

#include <pthread.h>

#include <atomic>
#include <thread>

#include "grpcpp/client_context.h"

namespace h3::cli {

// Turns Ctrl-C (SIGINT) into ClientContext::TryCancel for the lifetime of the
// object, so that a blocking call or stream on `context` ends with CANCELLED
// instead of the process dying with the call open.
//
// Blocks SIGINT in the calling thread and waits for it on a thread of its
// own; threads started later (gRPC's) inherit the mask, so construct it
// before creating the channel. The process keeps SIGINT blocked after the
// destructor. `context` must outlive the object. Not copyable.
class CancelOnInterrupt {
 public:
  explicit CancelOnInterrupt(grpc::ClientContext* context);
  ~CancelOnInterrupt();
  CancelOnInterrupt(const CancelOnInterrupt&) = delete;
  CancelOnInterrupt& operator=(const CancelOnInterrupt&) = delete;

  // True once a SIGINT has cancelled the call.
  bool interrupted() const { return interrupted_.load(); }

 private:
  void Watch();

  grpc::ClientContext* context_;
  std::atomic<bool> done_{false};
  std::atomic<bool> interrupted_{false};
  std::thread watcher_;
};

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_INTERRUPT_H_
