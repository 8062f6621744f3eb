#include "server/status.h"

#include <string>

namespace h3::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode both number the canonical codes
  // of google.rpc.Code; anything else is UNKNOWN.
  const int code = static_cast<int>(status.code());
  const grpc::StatusCode grpc_code =
      code > 0 && code <= grpc::StatusCode::UNAUTHENTICATED
          ? static_cast<grpc::StatusCode>(code)
          : grpc::StatusCode::UNKNOWN;
  return grpc::Status(grpc_code, std::string(status.message()));
}

HttpError ToHttpError(const absl::Status& status) {
  HttpError e;
  e.message = std::string(status.message());
  // OpenAI's types: invalid_request_error for what the client can fix,
  // server_error for what it cannot.
  e.type = "invalid_request_error";
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      e.status = 400;
      break;
    case absl::StatusCode::kUnimplemented:
      e.status = 400;
      e.code = "unsupported";
      break;
    case absl::StatusCode::kUnauthenticated:
      e.status = 401;
      e.code = "invalid_api_key";
      break;
    case absl::StatusCode::kPermissionDenied:
      e.status = 403;
      break;
    case absl::StatusCode::kNotFound:
      e.status = 404;
      break;
    case absl::StatusCode::kAlreadyExists:
      e.status = 409;
      break;
    case absl::StatusCode::kResourceExhausted:
      e.status = 429;
      e.type = "rate_limit_error";
      e.code = "queue_full";
      break;
    case absl::StatusCode::kCancelled:
      e.status = 499;  // nginx's "client closed request"
      break;
    case absl::StatusCode::kUnavailable:
      e.status = 503;
      e.type = "server_error";
      e.code = "unavailable";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      e.status = 504;
      e.type = "server_error";
      break;
    default:
      e.status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

}  // namespace h3::server
