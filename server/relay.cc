#include "server/relay.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace h3::server {

absl::Status Relay(engine::RequestOutput& output,
                   const std::function<bool()>& client_gone,
                   const std::function<bool(const engine::Delta&)>& sink) {
  while (true) {
    std::optional<engine::Delta> delta = output.Next(kClientPollInterval);
    if (client_gone()) {
      output.Cancel();
      return absl::CancelledError("the client went away");
    }
    if (!delta.has_value()) continue;
    if (delta->finish == engine::FinishReason::kError) {
      return absl::InternalError(
          absl::StrCat("the engine failed: ", delta->error.message()));
    }
    const bool last = delta->finish != engine::FinishReason::kNone;
    if (!sink(*delta)) {
      output.Cancel();
      return absl::CancelledError("the client went away");
    }
    if (last) return absl::OkStatus();
  }
}

}  // namespace h3::server
