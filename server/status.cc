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

}  // namespace h3::server
