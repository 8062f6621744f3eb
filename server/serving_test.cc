// The server's life with requests in flight: cancel, abort and deadlines
// free slots (seen through GetServerInfo and the gauges), the waiting queue
// is bounded, request ids are unique, metrics move, health, and draining.
#include <thread>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/testing/test_server.h"

namespace h3::server {
namespace {

using ::testing::HasSubstr;
using namespace testing;  // NOLINT: the test server helpers

// A request that runs for many seconds unless ended: 60000 greedy tokens
// (attention over a growing context).
v1::GenerateRequest Long(const std::string& id) {
  v1::GenerateRequest r = GreedyIds({1, 2, 3}, 60000);
  r.set_request_id(id);
  return r;
}

// A Generate call left open, its first message read.
struct OpenCall {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  v1::GenerateResponse first;
};

std::unique_ptr<OpenCall> Open(v1::TextGeneration::Stub& stub,
                               const v1::GenerateRequest& request,
                               bool read_first = true) {
  auto call = std::make_unique<OpenCall>();
  call->reader = stub.Generate(&call->context, request);
  if (read_first) {
    EXPECT_TRUE(call->reader->Read(&call->first));
  }
  return call;
}

// Cancels and finishes it.
grpc::Status Close(OpenCall& call) {
  call.context.TryCancel();
  v1::GenerateResponse ignored;
  while (call.reader->Read(&ignored)) {
  }
  return call.reader->Finish();
}

ServerOptions LongOptions() {
  ServerOptions options = LoopbackOptions();
  options.max_sequence_length = 1 << 16;
  options.max_new_tokens = 60000;
  options.slots = 2;
  options.scheduler.max_waiting = 1;
  return options;
}

class ServingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options = LongOptions();
    options.metrics_port = 0;
    server_ = StartServer(options).release();
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = Connect(*server_);
  }
  // Every test leaves the server idle.
  void TearDown() override {
    EXPECT_TRUE(WaitFor([&] { return Idle(); }));
  }

  bool Idle() { return testing::Idle(*stub_, 2); }
  std::map<std::string, double> Metrics() {
    return ParseMetrics(HttpGetMetrics(server_->metrics_port()));
  }

  static Server* server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
};

Server* ServingTest::server_ = nullptr;

TEST_F(ServingTest, CancelFreesItsSlot) {
  const double cancelled_before =
      Metrics()["h3_requests_total{finish_reason=\"cancelled\"}"];
  auto call = Open(*stub_, Long("cancel-me"));
  v1::ServerInfo info = Info(*stub_);
  EXPECT_EQ(info.running_requests(), 1u);
  EXPECT_EQ(info.free_slots(), 1u);
  EXPECT_TRUE(WaitFor([&] {
    auto m = Metrics();
    return m["h3_requests_running"] == 1 && m["h3_slots_free"] == 1 &&
           m["h3_slots_used"] == 1;
  }));

  EXPECT_EQ(Close(*call).error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return Idle(); }));
  EXPECT_TRUE(WaitFor([&] {
    auto m = Metrics();
    return m["h3_requests_running"] == 0 && m["h3_slots_free"] == 2 &&
           m["h3_requests_total{finish_reason=\"cancelled\"}"] ==
               cancelled_before + 1;
  }));
}

TEST_F(ServingTest, AbortEndsTheStreamAndFreesItsSlot) {
  auto call = Open(*stub_, Long("abort-me"));
  {
    grpc::ClientContext context;
    v1::AbortRequest request;
    request.set_request_id("abort-me");
    v1::AbortResponse response;
    ASSERT_TRUE(stub_->Abort(&context, request, &response).ok());
    EXPECT_TRUE(response.found());
  }
  v1::GenerateResponse last, message;
  while (call->reader->Read(&message)) last = message;
  EXPECT_TRUE(call->reader->Finish().ok());
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_CANCELLED);
  EXPECT_LT(last.usage().generated_tokens(), 60000u);
  EXPECT_TRUE(WaitFor([&] { return Idle(); }));

  grpc::ClientContext context;
  v1::AbortRequest request;
  request.set_request_id("abort-me");
  v1::AbortResponse response;
  ASSERT_TRUE(stub_->Abort(&context, request, &response).ok());
  EXPECT_FALSE(response.found());  // gone
}

TEST_F(ServingTest, DeadlineFreesTheSlotOfRunningAndWaitingRequests) {
  const Generation running =
      Generate(*stub_, Long("deadline-1"), std::chrono::milliseconds(300));
  EXPECT_EQ(running.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_FALSE(running.ids.empty());
  EXPECT_TRUE(WaitFor([&] { return Idle(); }));

  // Both slots taken: the third request waits, and its deadline passes.
  auto a = Open(*stub_, Long("a"));
  auto b = Open(*stub_, Long("b"));
  const Generation waiting =
      Generate(*stub_, Long("c"), std::chrono::milliseconds(300));
  EXPECT_EQ(waiting.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(waiting.ids.empty());
  EXPECT_TRUE(WaitFor([&] { return Info(*stub_).waiting_requests() == 0; }));
  Close(*a);
  Close(*b);
}

TEST_F(ServingTest, FullQueueIsResourceExhausted) {
  auto a = Open(*stub_, Long("a"));
  auto b = Open(*stub_, Long("b"));
  auto c = Open(*stub_, Long("c"), /*read_first=*/false);
  ASSERT_TRUE(WaitFor([&] { return Info(*stub_).waiting_requests() == 1; }));
  const Generation d = Generate(*stub_, Long("d"));
  EXPECT_EQ(d.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(d.status.error_message(), HasSubstr("waiting"));
  EXPECT_GE(Metrics()["h3_requests_rejected_total{code=\"resource_exhausted\","
                      "protocol=\"grpc\"}"],
            1);
  // Cancelling the waiting one frees its place in the queue.
  Close(*c);
  EXPECT_TRUE(WaitFor([&] { return Info(*stub_).waiting_requests() == 0; }));
  Close(*a);
  Close(*b);
}

TEST_F(ServingTest, RequestIdsAreUniqueWhileHeld) {
  auto a = Open(*stub_, Long("same"));
  const Generation twin = Generate(*stub_, Long("same"));
  EXPECT_EQ(twin.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(twin.status.error_message(), HasSubstr("same"));
  Close(*a);
  ASSERT_TRUE(WaitFor([&] { return Idle(); }));
  // Free again once it ended.
  const Generation again = Generate(*stub_, GreedyIds({4}, 3));
  EXPECT_TRUE(again.status.ok());
}

TEST_F(ServingTest, MetricsMoveWithRequests) {
  auto before = Metrics();
  const Generation g = Generate(*stub_, GreedyIds({1, 2, 3, 4, 5}, 7));
  ASSERT_TRUE(g.status.ok());
  std::map<std::string, double> after;
  ASSERT_TRUE(WaitFor([&] {
    after = Metrics();
    return after["h3_requests_total{finish_reason=\"length\"}"] ==
           before["h3_requests_total{finish_reason=\"length\"}"] + 1;
  }));
  auto moved = [&](const std::string& series) {
    return after[series] - before[series];
  };
  EXPECT_EQ(moved("h3_generation_tokens_total"), 7);
  EXPECT_EQ(moved("h3_prompt_tokens_total"), 5);
  EXPECT_EQ(moved("h3_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(moved("h3_request_duration_seconds_count"), 1);
  EXPECT_EQ(moved("h3_queue_time_seconds_count"), 1);
  EXPECT_EQ(moved("h3_inter_token_latency_seconds_count"), 6);
  EXPECT_EQ(moved("h3_decode_batch_size_count"), 6);
  EXPECT_EQ(moved("h3_prefill_batch_tokens_sum"), 5);
  EXPECT_GT(after["h3_engine_iterations_total"], 0);
  // The 7 steps' times (and any tail's), and the loop's own time at every
  // iteration.
  EXPECT_GE(moved("h3_engine_step_seconds_count"), 7);
  EXPECT_LE(moved("h3_engine_step_seconds_count"),
            moved("h3_engine_iterations_total"));
  EXPECT_GT(moved("h3_engine_step_seconds_sum"), 0);
  EXPECT_EQ(moved("h3_engine_host_seconds_count"),
            moved("h3_engine_iterations_total"));
  EXPECT_EQ(after["h3_slots_free"], 2);
  EXPECT_EQ(after["h3_requests_waiting"], 0);
  EXPECT_GT(after["h3_start_time_seconds"], 0);
  const auto build = after.lower_bound("h3_build_info{");
  ASSERT_NE(build, after.end());
  EXPECT_THAT(build->first, HasSubstr(Info(*stub_).version()));
  EXPECT_EQ(build->second, 1);
}

TEST(HealthTest, ServingWithAModel) {
  std::unique_ptr<Server> server = StartServer(LoopbackOptions());
  ASSERT_NE(server, nullptr);
  auto health = grpc::health::v1::Health::NewStub(ChannelTo(*server));
  for (const std::string service : {"", "h3.v1.TextGeneration"}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(health->Check(&context, request, &response).ok());
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING)
        << service;
  }
}

TEST(DrainTest, RunningRequestsFinishAndNewOnesAreRefused) {
  std::unique_ptr<Server> server = StartServer(LongOptions());
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);
  // Long enough (a growing context) to still run when Drain starts.
  auto call = Open(*stub, GreedyIds({1, 2, 3}, 8000));

  bool drained = false;
  std::thread drain([&] { drained = server->Drain(std::chrono::seconds(60)); });
  auto health = grpc::health::v1::Health::NewStub(ChannelTo(*server));
  EXPECT_TRUE(WaitFor([&] {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckResponse response;
    return health->Check(&context, {}, &response).ok() &&
           response.status() ==
               grpc::health::v1::HealthCheckResponse::NOT_SERVING;
  }));
  const Generation refused = Generate(*stub, GreedyIds({1}, 2));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("shutting down"));
  EXPECT_TRUE(Info(*stub).draining());

  // The running request runs to its end.
  size_t tokens = call->first.token_ids_size();
  v1::GenerateResponse message, last;
  while (call->reader->Read(&message)) {
    tokens += message.token_ids_size();
    last = message;
  }
  EXPECT_TRUE(call->reader->Finish().ok());
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(tokens, 8000u);
  drain.join();
  EXPECT_TRUE(drained);
  server->Shutdown(std::chrono::seconds(1));
  server->Wait();
}

}  // namespace
}  // namespace h3::server
