// `h3 health`, the command the Docker images' HEALTHCHECK runs, against a
// real h3serve: SERVING exits 0; a draining server (NOT_SERVING), an unknown
// service, and an address where nothing listens exit 1 with the reason.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/random_model.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"

namespace h3 {
namespace {

using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::h3::testing::Subprocess;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kH3 = H3_BIN;
const std::string kH3serve = H3SERVE_BIN;

class HealthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // ctest runs each test in a process of its own, some at once.
    model_ = h3::testing::TempPath("health.h3");
    const absl::Status written = h3::testing::WriteRandomModel(
        h3::testing::SmallHybridConfig(61), model_);
    if (!written.ok()) setup_error_ = std::string(written.message());
  }

  static void TearDownTestSuite() { std::remove(model_.c_str()); }

  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static std::unique_ptr<Subprocess> StartServer(
      const std::vector<std::string>& flags, std::string* address) {
    return testing::StartH3serve(kH3serve, model_, flags, address);
  }

  static RunResult Health(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kH3, "health"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, 30s);
  }

  static inline std::string model_;
  static inline std::string setup_error_;
};

TEST_F(HealthTest, ServingServerExitsZero) {
  std::string address;
  std::unique_ptr<Subprocess> server = StartServer({}, &address);
  ASSERT_FALSE(address.empty()) << server->output();
  for (const std::string service : {"", "h3.v1.TextGeneration"}) {
    RunResult result = Health({"--server", address, "--service", service});
    EXPECT_EQ(result.exit_code, 0) << service << ": " << result.out;
    EXPECT_EQ(result.out, "SERVING\n") << service;
  }
  EXPECT_EQ(server->Stop(SIGTERM, 30s), 0) << server->output();
}

TEST_F(HealthTest, UnknownServiceIsNotFound) {
  std::string address;
  std::unique_ptr<Subprocess> server = StartServer({}, &address);
  ASSERT_FALSE(address.empty()) << server->output();
  RunResult result =
      Health({"--server", address, "--service", "no.such.Service"});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out, HasSubstr("h3 health: " + address +
                                    " (service no.such.Service): NOT_FOUND"));
  EXPECT_EQ(server->Stop(SIGTERM, 30s), 0) << server->output();
}

// The number of running requests `h3 server-info` reports, or -1.
int RunningRequests(const std::string& address) {
  RunResult info =
      RunCommand({kH3, "server-info", "--server", address, "--json"});
  if (info.exit_code != 0) return -1;
  const nlohmann::json json = nlohmann::json::parse(info.out, nullptr, false);
  if (json.is_discarded()) return -1;
  return json.value("running_requests", 0);
}

TEST_F(HealthTest, DrainingServerIsNotServing) {
  // One slot and a generation that would run for many seconds, so that the
  // server keeps draining until the test cancels it.
  std::string address;
  std::unique_ptr<Subprocess> server =
      StartServer({"--slots", "1", "--max-sequence-length", "200000",
                   "--max-new-tokens", "199000", "--shutdown-grace", "60"},
                  &address);
  ASSERT_FALSE(address.empty()) << server->output();
  signal(SIGINT, SIG_DFL);  // a background job's ignored SIGINT is inherited
  Subprocess generate({kH3, "generate", "--server", address, "--prompt-ids",
                       "1,2,3", "--max-tokens", "199000", "--ignore-eos"});
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (RunningRequests(address) != 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(RunningRequests(address), 1) << generate.output();

  ASSERT_EQ(kill(server->pid(), SIGTERM), 0);
  ASSERT_THAT(server->WaitForLine("draining", 10s), HasSubstr("SIGTERM"));
  RunResult result = Health({"--server", address});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out, HasSubstr("NOT_SERVING\n"));
  EXPECT_THAT(result.out, HasSubstr("h3 health: " + address + ": NOT_SERVING"));

  // Cancelling the last request ends the drain: the server exits 0.
  EXPECT_EQ(generate.Stop(SIGINT, 20s), 130) << generate.output();
  EXPECT_EQ(server->Stop(0, 30s), 0) << server->output();
}

TEST_F(HealthTest, NothingListeningIsUnavailable) {
  // A port that was free a moment ago: bound by nobody now.
  std::string address;
  {
    std::unique_ptr<Subprocess> server = StartServer({}, &address);
    ASSERT_FALSE(address.empty()) << server->output();
    EXPECT_EQ(server->Stop(SIGTERM, 30s), 0) << server->output();
  }
  const auto start = std::chrono::steady_clock::now();
  RunResult result = Health({"--server", address, "--timeout", "10"});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out, HasSubstr("h3 health: " + address + ": UNAVAILABLE"));
  // Fails fast rather than waiting for the deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 9s);
}

TEST_F(HealthTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Health({"--timeout", "0"}).exit_code, 2);
  EXPECT_EQ(Health({"--no-such-flag"}).exit_code, 2);
}

}  // namespace
}  // namespace h3
