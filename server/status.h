#ifndef H3_SERVER_STATUS_H_
#define H3_SERVER_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace h3::server {

// The one place where absl::Status becomes grpc::Status: the canonical codes
// are the same numbers, and the message is kept as it is.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace h3::server

#endif  // H3_SERVER_STATUS_H_
