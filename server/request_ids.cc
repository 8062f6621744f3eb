#include "server/request_ids.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace h3::server {

std::string RandomHex128() {
  char bytes[16];
  size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t n = getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    // Linux >= 3.17 always has getrandom; without it no id is safe to give.
    if (n < 0) std::abort();
    filled += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof bytes));
}

RequestIds::Held::Held(RequestIds* ids, std::string scope, std::string id)
    : ids_(ids),
      scope_(std::move(scope)),
      id_(std::move(id)),
      engine_id_(RandomHex128()) {}

RequestIds::Held::~Held() { ids_->Release(scope_, id_, engine_id_); }

std::string RequestIds::Key(const std::string& scope, const std::string& id) {
  // Scopes (key names) hold no NUL byte, so the key is unambiguous.
  return absl::StrCat(scope, std::string(1, '\0'), id);
}

absl::StatusOr<std::unique_ptr<RequestIds::Held>> RequestIds::Hold(
    const std::string& scope, const std::string& id, const std::string& prefix,
    Ended ended) {
  std::unique_ptr<Held> held(new Held(
      this, scope, id.empty() ? absl::StrCat(prefix, RandomHex128()) : id));
  {
    absl::MutexLock lock(&mu_);
    Holder& holder = held_[Key(scope, held->id())];
    if (holder.engine_id.empty() || (holder.ended && holder.ended())) {
      holder = {held->engine_id(), std::move(ended)};
      return held;
    }
  }
  // Destroyed outside the lock; its Release finds another engine id there
  // and leaves the holder's entry alone.
  return absl::AlreadyExistsError(
      absl::StrCat("request_id \"", held->id(),
                   "\" is already in use by one of your requests in flight"));
}

std::optional<std::string> RequestIds::Find(const std::string& scope,
                                            const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(Key(scope, id));
  if (it == held_.end()) return std::nullopt;
  return it->second.engine_id;
}

void RequestIds::Release(const std::string& scope, const std::string& id,
                         const std::string& engine_id) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(Key(scope, id));
  if (it != held_.end() && it->second.engine_id == engine_id) held_.erase(it);
}

}  // namespace h3::server
