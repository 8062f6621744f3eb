#include "clients/h3/channel.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace h3::cli {
namespace {

// Adds the authorization metadata to every call of the channel.
class ApiKeyInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit ApiKeyInterceptor(const std::string* header) : header_(header) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class ApiKeyInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ApiKeyInterceptorFactory(std::string key)
      : header_(absl::StrCat("Bearer ", key)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new ApiKeyInterceptor(&header_);
  }

 private:
  // Outlives the channel's calls: the channel owns the factory.
  const std::string header_;
};

absl::StatusOr<std::string> ReadPem(const std::string& flag,
                                    const std::string& path) {
  return ReadSmallFile(flag, path, "a PEM file");
}

}  // namespace

void AddChannelFlags(CLI::App* command, ChannelFlags* flags) {
  command
      ->add_option("--api-key", flags->api_key,
                   "API key of h3serve --api-key-file (default: $H3_API_KEY)")
      ->envname("H3_API_KEY");
  command->add_flag("--tls", flags->tls,
                    "Connect over TLS, trusting the system's CAs");
  command->add_option("--tls-ca", flags->tls_ca,
                      "Connect over TLS, trusting this PEM CA file");
  command->add_option("--tls-cert", flags->tls_cert,
                      "PEM client certificate, for servers that require one");
  command->add_option("--tls-key", flags->tls_key,
                      "PEM private key of --tls-cert");
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(
    const std::string& server, const ChannelFlags& flags) {
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (flags.tls || !flags.tls_ca.empty() || !flags.tls_cert.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!flags.tls_ca.empty()) {
      absl::StatusOr<std::string> ca = ReadPem("--tls-ca", flags.tls_ca);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
    }
    if (!flags.tls_cert.empty() || !flags.tls_key.empty()) {
      absl::StatusOr<std::string> cert = ReadPem("--tls-cert", flags.tls_cert);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadPem("--tls-key", flags.tls_key);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments arguments;
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  if (!flags.api_key.empty()) {
    interceptors.push_back(
        std::make_unique<ApiKeyInterceptorFactory>(flags.api_key));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      server, credentials, arguments, std::move(interceptors));
}

}  // namespace h3::cli
