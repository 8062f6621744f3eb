// gRPC over TLS (--tls-cert, --tls-key) and mutual TLS (--tls-client-ca),
// with a self-signed certificate made by the openssl command for the test.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/testing/test_server.h"
#include "tests/support/temp_path.h"

namespace h3::server {
namespace {

using namespace testing;  // NOLINT: the test server helpers

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(h3::testing::TempPath("h3_tls"));
    std::filesystem::create_directories(*dir_);
    // A P-256 key and a certificate for 127.0.0.1, valid for a day.
    const std::string command =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
        "-nodes -days 1 -subj /CN=localhost -addext "
        "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
        *dir_ + "/key.pem -out " + *dir_ + "/cert.pem 2>/dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static std::string Cert() { return *dir_ + "/cert.pem"; }
  static std::string Key() { return *dir_ + "/key.pem"; }

  static grpc::StatusCode InfoCode(
      const Server& server,
      std::shared_ptr<grpc::ChannelCredentials> credentials) {
    auto channel = grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server.port()), credentials);
    auto stub = v1::TextGeneration::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    v1::ServerInfo info;
    return stub->GetServerInfo(&context, {}, &info).error_code();
  }
  static std::shared_ptr<grpc::ChannelCredentials> Trusting(bool client_cert) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(Cert());
    if (client_cert) {
      ssl.pem_cert_chain = Read(Cert());
      ssl.pem_private_key = Read(Key());
    }
    return grpc::SslCredentials(ssl);
  }

  static std::string* dir_;
};

std::string* TlsTest::dir_ = nullptr;

TEST_F(TlsTest, ServesOverTlsOnly) {
  ServerOptions options = LoopbackOptions();
  options.grpc.tls_cert = Cert();
  options.grpc.tls_key = Key();
  std::unique_ptr<Server> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(InfoCode(*server, Trusting(false)), grpc::StatusCode::OK);
  EXPECT_NE(InfoCode(*server, grpc::InsecureChannelCredentials()),
            grpc::StatusCode::OK);
}

TEST_F(TlsTest, MutualTlsNeedsAClientCertificate) {
  ServerOptions options = LoopbackOptions();
  options.grpc.tls_cert = Cert();
  options.grpc.tls_key = Key();
  options.grpc.tls_client_ca = Cert();
  std::unique_ptr<Server> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(InfoCode(*server, Trusting(true)), grpc::StatusCode::OK);
  EXPECT_NE(InfoCode(*server, Trusting(false)), grpc::StatusCode::OK);
}

TEST_F(TlsTest, BadTlsOptionsAreRefusedAtStart) {
  ServerOptions options = LoopbackOptions();
  options.grpc.tls_cert = Cert();
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), ::testing::HasSubstr("--tls-key"));
  options.grpc.tls_key = *dir_ + "/missing.pem";
  server = Server::Start(options);
  EXPECT_THAT(server.status().message(), ::testing::HasSubstr("missing.pem"));
}

}  // namespace
}  // namespace h3::server
