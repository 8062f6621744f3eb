// Who may end a request and when its id is free again: a cancelled unary
// Complete frees its slot, server-assigned ids are unguessable, a client's
// id is free as soon as its call ended, and Abort and ALREADY_EXISTS reach
// only the caller's own requests.
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/test_server.h"

namespace h3::server {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using namespace testing;  // NOLINT: the test server helpers

// Runs for many seconds unless ended (60000 greedy tokens).
v1::GenerateRequest Long(const std::string& id) {
  v1::GenerateRequest r = GreedyIds({1, 2, 3}, 60000);
  r.set_request_id(id);
  return r;
}

ServerOptions TwoSlots() {
  ServerOptions options = LoopbackOptions();
  options.max_sequence_length = 1 << 16;
  options.max_new_tokens = 60000;
  options.slots = 2;
  options.metrics_port = 0;
  return options;
}

// A unary Complete running on its own thread until cancelled.
struct OpenComplete {
  grpc::ClientContext context;
  v1::GenerateResponse response;
  grpc::Status status;
  std::thread thread;

  OpenComplete(v1::TextGeneration::Stub& stub,
               const v1::GenerateRequest& request) {
    thread = std::thread(
        [&, request] { status = stub.Complete(&context, request, &response); });
  }
  grpc::Status Cancel() {
    context.TryCancel();
    thread.join();
    return status;
  }
};

class CallsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartServer(TwoSlots()).release(); }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = Connect(*server_);
  }
  void TearDown() override {
    EXPECT_TRUE(WaitFor([&] { return Idle(); }));
  }

  bool Idle() { return testing::Idle(*stub_, 2); }
  bool Running(uint32_t n) { return Info(*stub_).running_requests() == n; }
  double Finished(const std::string& reason) {
    return ParseMetrics(HttpGetMetrics(server_->metrics_port()))[absl::StrCat(
        "h3_requests_total{finish_reason=\"", reason, "\"}")];
  }

  static Server* server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
};

Server* CallsTest::server_ = nullptr;

TEST_F(CallsTest, CancelledCompleteFreesItsSlot) {
  const double cancelled = Finished("cancelled");
  const double length = Finished("length");
  OpenComplete call(*stub_, Long("unary"));
  ASSERT_TRUE(WaitFor([&] { return Running(1); }));
  EXPECT_EQ(call.Cancel().error_code(), grpc::StatusCode::CANCELLED);
  // Long before its 60000 tokens could have been generated.
  EXPECT_TRUE(WaitFor([&] { return Idle(); }));
  EXPECT_TRUE(WaitFor([&] { return Finished("cancelled") == cancelled + 1; }));
  EXPECT_EQ(Finished("length"), length);
}

TEST_F(CallsTest, CompleteWithADeadlineEndsAtIt) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(300));
  v1::GenerateResponse response;
  EXPECT_EQ(stub_->Complete(&context, Long(""), &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(WaitFor([&] { return Idle(); }));
}

TEST_F(CallsTest, AnIdIsFreeAsSoonAsItsCallEnded) {
  for (int i = 0; i < 5; ++i) {
    OpenComplete call(*stub_, Long("reused"));
    ASSERT_TRUE(WaitFor([&] { return Running(1); }));
    ASSERT_EQ(call.Cancel().error_code(), grpc::StatusCode::CANCELLED);
    // At once, without waiting for the engine to retire the first.
    grpc::ClientContext context;
    v1::GenerateRequest again = GreedyIds({1}, 2);
    again.set_request_id("reused");
    v1::GenerateResponse response;
    const grpc::Status status = stub_->Complete(&context, again, &response);
    EXPECT_TRUE(status.ok()) << i << ": " << status.error_message();
    EXPECT_EQ(response.request_id(), "reused");
  }
}

TEST_F(CallsTest, ServerIdsAreRandom128Bit) {
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    ASSERT_TRUE(stub_->Complete(&context, GreedyIds({1}, 1), &response).ok());
    EXPECT_THAT(response.request_id(), MatchesRegex("h3-[0-9a-f]{32}"));
    ids.insert(response.request_id());
  }
  EXPECT_EQ(ids.size(), 3u);
  // The counter the ids once were is no id now.
  grpc::ClientContext context;
  v1::AbortRequest abort;
  abort.set_request_id("h3-1");
  v1::AbortResponse found;
  ASSERT_TRUE(stub_->Abort(&context, abort, &found).ok());
  EXPECT_FALSE(found.found());
}

}  // namespace
}  // namespace h3::server
