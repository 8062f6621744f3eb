#include "server/api_keys.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/read_file.h"

namespace h3::server {
namespace {

constexpr size_t kMaxNameBytes = 64;
constexpr size_t kMinKeyBytes = 16;
constexpr size_t kMaxKeyBytes = 256;

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

// Why `key` cannot be a key, or "" when it can.
std::string KeyProblem(absl::string_view key) {
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) {
    return absl::StrCat("the key has ", key.size(), " characters; it needs ",
                        kMinKeyBytes, " to ", kMaxKeyBytes);
  }
  for (char c : key) {
    if (c <= ' ' || c > '~') {
      return "the key holds a space, control or non-ASCII character";
    }
  }
  return "";
}

// Whether `a` equals `secret`, in time that depends on secret.size() only.
bool SameKey(absl::string_view a, const std::string& secret) {
  unsigned char diff = a.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char c = i < a.size() ? a[i] : 0;
    diff |= static_cast<unsigned char>(c ^ secret[i]);
  }
  return diff == 0;
}

}  // namespace

absl::string_view AuthFailureName(AuthFailure failure) {
  switch (failure) {
    case AuthFailure::kMissing:
      return "missing";
    case AuthFailure::kMalformed:
      return "malformed";
    case AuthFailure::kUnknownKey:
      return "unknown_key";
  }
  return "unknown_key";
}

absl::StatusOr<ApiKeys> ApiKeys::Parse(absl::string_view text) {
  ApiKeys keys;
  absl::flat_hash_set<std::string> names, secrets;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    auto bad = [number](absl::string_view problem) {
      return absl::InvalidArgumentError(
          absl::StrCat("API key file line ", number, ": ", problem));
    };
    Key key;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      key.name = absl::StrCat("line-", number);
      key.secret = std::string(line);
    } else {
      key.name = std::string(line.substr(0, colon));
      key.secret = std::string(line.substr(colon + 1));
      if (!ValidName(key.name)) {
        return bad(absl::StrCat("the name before ':' must be 1 to ",
                                kMaxNameBytes, " of A-Z a-z 0-9 . _ -"));
      }
    }
    if (std::string problem = KeyProblem(key.secret); !problem.empty()) {
      return bad(problem);
    }
    if (!names.insert(key.name).second) {
      return bad(absl::StrCat("the name \"", key.name, "\" is used twice"));
    }
    if (!secrets.insert(key.secret).second) {
      return bad("the same key appears on an earlier line");
    }
    keys.keys_.push_back(std::move(key));
  }
  if (keys.keys_.empty()) {
    return absl::InvalidArgumentError(
        "the API key file holds no key (one \"name:key\" or \"key\" a line)");
  }
  return keys;
}

absl::StatusOr<ApiKeys> ApiKeys::Load(const std::string& path) {
  absl::StatusOr<std::string> text =
      ReadSmallFile("--api-key-file", path, "API keys");
  if (!text.ok()) return text.status();
  absl::StatusOr<ApiKeys> keys = Parse(*text);
  if (!keys.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--api-key-file ", path, ": ", keys.status().message()));
  }
  return keys;
}

absl::StatusOr<std::string> ApiKeys::Authenticate(
    absl::string_view authorization, AuthFailure* failure) const {
  if (authorization.empty()) {
    *failure = AuthFailure::kMissing;
    return absl::UnauthenticatedError(
        "an API key is required: send \"authorization: Bearer <key>\"");
  }
  absl::string_view token = authorization;
  if (token.size() < 7 ||
      !absl::EqualsIgnoreCase(token.substr(0, 7), "Bearer ")) {
    *failure = AuthFailure::kMalformed;
    return absl::UnauthenticatedError(
        "the authorization value must be \"Bearer <key>\"");
  }
  token = absl::StripAsciiWhitespace(token.substr(7));
  int found = -1;
  for (size_t i = 0; i < keys_.size(); ++i) {
    // Every key is compared, whichever matches.
    if (SameKey(token, keys_[i].secret)) found = static_cast<int>(i);
  }
  if (found < 0) {
    *failure = AuthFailure::kUnknownKey;
    return absl::UnauthenticatedError("the API key is not valid");
  }
  return keys_[found].name;
}

}  // namespace h3::server
