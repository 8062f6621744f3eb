#ifndef H3_SERVER_RELAY_H_
#define H3_SERVER_RELAY_H_

#include <chrono>
#include <functional>

#include "absl/status/status.h"
#include "engine/scheduler/request_output.h"

namespace h3::server {

// How often a handler waiting for the engine asks whether its client is
// still there: a client that leaves is noticed within this, and its request
// ends at the engine loop's next iteration.
inline constexpr std::chrono::milliseconds kClientPollInterval(50);

// The one way both front ends (gRPC and HTTP) read a submitted request:
// hands every delta of `output` to `sink` until the final one (finish !=
// kNone) has been handed over, then returns OK. While no delta is ready it
// asks `client_gone` every kClientPollInterval (and after each delta); when
// that says true, or `sink` returns false, it cancels the request (the loop
// frees its slot at its next iteration) and returns Cancelled ("the client
// went away"). A final delta of kError is not handed to `sink`: Internal
// ("the engine failed: ...") is returned instead.
// Runs on the caller's thread; `sink` and `client_gone` are called from it.
absl::Status Relay(engine::RequestOutput& output,
                   const std::function<bool()>& client_gone,
                   const std::function<bool(const engine::Delta&)>& sink);

}  // namespace h3::server

#endif  // H3_SERVER_RELAY_H_
