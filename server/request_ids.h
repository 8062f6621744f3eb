#ifndef H3_SERVER_REQUEST_IDS_H_
#define H3_SERVER_REQUEST_IDS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace h3::server {

// 32 lowercase hex digits of 128 bits from the kernel's CSPRNG (getrandom).
std::string RandomHex128();

// The request ids of the calls in flight, per caller. A caller's scope is
// the name of its API key, or "" for everyone when the server has no keys
// (docs/security.md); a client's ids, Abort and ALREADY_EXISTS reach only
// its own scope. Each call gets a fresh engine id (random, never shown to
// clients), so an id is free again the moment its call ends, whether or not
// the engine loop has retired the request yet. Thread-safe.
class RequestIds {
 public:
  // An id held by a call; gives it back when destroyed.
  class Held {
   public:
    ~Held();
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    const std::string& id() const { return id_; }  // what the client sees
    const std::string& engine_id() const { return engine_id_; }

   private:
    friend class RequestIds;
    Held(RequestIds* ids, std::string scope, std::string id);
    RequestIds* const ids_;
    const std::string scope_;
    const std::string id_;
    const std::string engine_id_;
  };

  // Says whether the holder's call has ended (its client cancelled or went
  // away) though its handler still runs; called under this class's lock,
  // so it must be quick and must not call back. May be empty.
  using Ended = std::function<bool()>;

  // Holds `id` in `scope`; an empty `id` gets a new unguessable one,
  // `prefix` followed by RandomHex128(). An id whose holder's call has
  // ended passes to the new call at once. AlreadyExists (naming only the
  // caller's own id) when the scope holds it for a live call.
  absl::StatusOr<std::unique_ptr<Held>> Hold(const std::string& scope,
                                             const std::string& id,
                                             const std::string& prefix,
                                             Ended ended = nullptr);

  // The engine id of `id` while a call of `scope` holds it.
  std::optional<std::string> Find(const std::string& scope,
                                  const std::string& id) const;

 private:
  // Forgets `id` if `engine_id` is what holds it.
  void Release(const std::string& scope, const std::string& id,
               const std::string& engine_id);
  static std::string Key(const std::string& scope, const std::string& id);

  mutable absl::Mutex mu_;
  struct Holder {
    std::string engine_id;
    Ended ended;
  };
  // Key(scope, id) -> its holder.
  absl::flat_hash_map<std::string, Holder> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace h3::server

#endif  // H3_SERVER_REQUEST_IDS_H_
