#ifndef H3_SERVER_STATUS_H_
#define H3_SERVER_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace h3::server {

// The one place where absl::Status becomes grpc::Status: the canonical codes
// are the same numbers, and the message is kept as it is.
grpc::Status ToGrpcStatus(const absl::Status& status);

// An error of the OpenAI-compatible HTTP API: the HTTP status and the fields
// of OpenAI's error object {"error": {"message", "type", "param", "code"}}.
// Empty `param` and `code` are written as null.
struct HttpError {
  int status = 500;
  std::string type;     // "invalid_request_error", "server_error", ...
  std::string message;  // for a person
  std::string param;    // the request field at fault, OpenAI's name
  std::string code;     // a machine-readable reason, e.g. "model_not_found"
};

// The one place where absl::Status becomes an HTTP status (with OpenAI's
// error type and code): InvalidArgument, OutOfRange, FailedPrecondition and
// Unimplemented 400; Unauthenticated 401; PermissionDenied 403; NotFound
// 404; AlreadyExists 409; ResourceExhausted 429; Cancelled 499 (the client
// went away; nobody reads it); Unavailable 503; DeadlineExceeded 504;
// anything else 500. The message is kept; `param` is left empty.
// REQUIRES: !status.ok().
HttpError ToHttpError(const absl::Status& status);

}  // namespace h3::server

#endif  // H3_SERVER_STATUS_H_
