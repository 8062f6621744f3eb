#ifndef H3_SERVER_API_KEYS_H_
#define H3_SERVER_API_KEYS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace h3::server {

// Why a request was not authenticated; its label in
// h3_unauthenticated_requests_total{reason}.
enum class AuthFailure { kMissing, kMalformed, kUnknownKey };
absl::string_view AuthFailureName(AuthFailure failure);

// The API keys a server accepts (--api-key-file). The file holds one key a
// line, "name:key" or a bare "key" (named "line-N" after its line); blank
// lines and lines starting with '#' are skipped, and spaces around a line
// are ignored. A name is 1-64 of [A-Za-z0-9._-]; a key is 16-256 printable
// ASCII characters without spaces (a bare key without ':'). Names and keys
// must be unique. Immutable, so thread-safe.
class ApiKeys {
 public:
  // No keys: every request is let through.
  ApiKeys() = default;

  // InvalidArgument naming the line and what is wrong with it (never the
  // key itself) for a malformed file.
  static absl::StatusOr<ApiKeys> Parse(absl::string_view text);
  // Parse of the file's contents; InvalidArgument naming the flag, the path
  // and (for a malformed file) the line.
  static absl::StatusOr<ApiKeys> Load(const std::string& path);

  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }

  // The name of the key that `authorization` ("Bearer <key>", the value of
  // the HTTP header or gRPC metadata; "" when absent) carries, or why not.
  // The key is compared with every accepted key in time that depends only on
  // the keys' lengths, never on where they differ.
  // REQUIRES: !empty().
  absl::StatusOr<std::string> Authenticate(absl::string_view authorization,
                                           AuthFailure* failure) const;

 private:
  struct Key {
    std::string name;
    std::string secret;
  };
  std::vector<Key> keys_;
};

}  // namespace h3::server

#endif  // H3_SERVER_API_KEYS_H_
