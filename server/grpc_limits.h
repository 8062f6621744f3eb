#ifndef H3_SERVER_GRPC_LIMITS_H_
#define H3_SERVER_GRPC_LIMITS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace h3::server {

// What one gRPC client may make the server hold, and how the port is
// secured. Each field has an h3serve flag; docs/security.md lists them and
// what Debian's gRPC 1.51 does not enforce.
struct GrpcLimits {
  int max_message_bytes = 4 << 20;   // --grpc-max-message-bytes (receive)
  int max_concurrent_streams = 64;   // per connection; --grpc-max-streams
  int max_metadata_bytes = 8 << 10;  // request headers; --grpc-max-metadata
  // Threads serving calls (each call holds one while it waits for the
  // engine); calls past it get RESOURCE_EXHAUSTED. --grpc-max-threads
  int max_threads = 256;
  int64_t max_connection_idle_ms = 300'000;  // no call for this: GOAWAY
  int64_t keepalive_time_ms = 60'000;        // ping an idle peer this often
  int64_t keepalive_timeout_ms = 20'000;     // drop it if no answer by then
  int64_t handshake_timeout_ms = 10'000;     // TLS/HTTP2 preface in time

  // TLS: a PEM certificate chain and its key (both or neither); with
  // tls_client_ca, clients must present a certificate it signed (mTLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
};

// Sets the limits on `builder` (message size, the channel arguments for
// streams, metadata, idle and keepalive, and a resource quota on threads).
void ApplyGrpcLimits(const GrpcLimits& limits, grpc::ServerBuilder* builder);

// TLS credentials from the files `limits` names, or insecure ones when it
// names none. InvalidArgument naming the flag and file when one is missing,
// unreadable, or given without its partner.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const GrpcLimits& limits);

}  // namespace h3::server

#endif  // H3_SERVER_GRPC_LIMITS_H_
