// The security flags end to end, with the binaries: h3serve --api-key-file
// (a malformed file stops it; h3 commands pass --api-key or $H3_API_KEY;
// health stays open), h3serve --tls-cert/--tls-key with `h3 ... --tls-ca`,
// and a unary Complete whose client process dies frees its slot.
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "tests/support/random_model.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"

namespace h3 {
namespace {

using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::h3::testing::Subprocess;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

const std::string kH3 = H3_BIN;
const std::string kH3serve = H3SERVE_BIN;
constexpr char kKey[] = "e2e-key-0123456789abcdef";

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = h3::testing::TempPath("h3_security");
    std::filesystem::create_directories(dir_);
    ASSERT_TRUE(h3::testing::WriteRandomModel(
                    h3::testing::SmallHybridConfig(64), dir_ + "/model.h3")
                    .ok());
    std::ofstream(dir_ + "/keys.txt") << "# e2e\ne2e:" << kKey << "\n";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static std::unique_ptr<Subprocess> Start(
      const std::vector<std::string>& flags, std::string* address) {
    return h3::testing::StartH3serve(kH3serve, dir_ + "/model.h3", flags,
                                     address);
  }
  static std::vector<std::string> Generate(const std::string& address) {
    return {kH3,     "generate", "--server",     address, "--prompt-ids",
            "1,2,3", "--greedy", "--max-tokens", "3",     "--ignore-eos",
            "--json"};
  }

  static inline std::string dir_;
};

TEST_F(SecurityTest, ApiKeysFromTheFlagOrTheEnvironment) {
  std::string address;
  auto server = Start({"--api-key-file", dir_ + "/keys.txt"}, &address);
  ASSERT_FALSE(address.empty()) << server->output();
  EXPECT_THAT(server->output(), Not(HasSubstr(kKey)));

  const RunResult refused = RunCommand(Generate(address));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.out, HasSubstr("UNAUTHENTICATED"));
  std::vector<std::string> with_key = Generate(address);
  with_key.insert(with_key.end(), {"--api-key", kKey});
  const RunResult flag = RunCommand(with_key);
  EXPECT_EQ(flag.exit_code, 0) << flag.out;
  setenv("H3_API_KEY", kKey, 1);
  const RunResult env = RunCommand(Generate(address));
  unsetenv("H3_API_KEY");
  EXPECT_EQ(env.exit_code, 0) << env.out;
  // Health needs no key.
  EXPECT_EQ(RunCommand({kH3, "health", "--server", address}).exit_code, 0);
  EXPECT_EQ(server->Stop(SIGTERM, 30s), 0);
  EXPECT_THAT(server->output(), Not(HasSubstr(kKey)));
}

TEST_F(SecurityTest, AMalformedKeyFileStopsTheServer) {
  const std::string file = dir_ + "/bad_keys.txt";
  std::ofstream(file) << "alice:short-secret\n";
  const RunResult run = RunCommand(
      {kH3serve, "--model", dir_ + "/model.h3", "--port", "0", "--metrics-port",
       "-1", "--http-port", "-1", "--api-key-file", file});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.out, HasSubstr("line 1: the key has 12 characters"));
  EXPECT_THAT(run.out, Not(HasSubstr("short-secret")));
}

TEST_F(SecurityTest, TlsWithH3TlsCa) {
  const std::string command =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
      "-nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      dir_ + "/key.pem -out " + dir_ + "/cert.pem 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::string address;
  auto server =
      Start({"--tls-cert", dir_ + "/cert.pem", "--tls-key", dir_ + "/key.pem"},
            &address);
  ASSERT_FALSE(address.empty()) << server->output();
  std::vector<std::string> tls = Generate(address);
  tls.insert(tls.end(), {"--tls-ca", dir_ + "/cert.pem"});
  const RunResult secure = RunCommand(tls);
  EXPECT_EQ(secure.exit_code, 0) << secure.out;
  EXPECT_NE(RunCommand(Generate(address), 30s).exit_code, 0);
}

TEST_F(SecurityTest, ACompleteWhoseClientDiesFreesItsSlot) {
  std::string address;
  auto server = Start({"--max-new-tokens", "60000", "--max-sequence-length",
                       "65536", "--slots", "2"},
                      &address);
  ASSERT_FALSE(address.empty()) << server->output();
  auto stub = v1::TextGeneration::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto running = [&] {
    grpc::ClientContext context;
    v1::ServerInfo info;
    EXPECT_TRUE(stub->GetServerInfo(&context, {}, &info).ok());
    return info.running_requests();
  };
  auto wait_for = [&](uint32_t n) {
    for (auto end = std::chrono::steady_clock::now() + 20s;
         std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(20ms)) {
      if (running() == n) return true;
    }
    return false;
  };
  Subprocess client({kH3, "generate", "--server", address, "--unary",
                     "--prompt-ids", "1,2,3", "--greedy", "--max-tokens",
                     "60000", "--ignore-eos"});
  ASSERT_TRUE(wait_for(1));
  client.Stop(SIGKILL, 10s);
  // Long before 60000 tokens could have been generated.
  EXPECT_TRUE(wait_for(0));
}

}  // namespace
}  // namespace h3
