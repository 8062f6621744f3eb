#ifndef H3_TESTS_E2E_FAKE_SERVER_H_
#define H3_TESTS_E2E_FAKE_SERVER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/server.h"
#include "grpcpp/support/status.h"
#include "h3/v1/text_generation.pb.h"

namespace h3::testing {

// An in-process h3.v1.TextGeneration server on loopback whose Generate and
// Complete answer from a script instead of a model, for testing clients: it
// records what they ask and answers exactly what a test wants, errors and
// never-ending streams included, at once. GetModelInfo answers what
// SetModelInfo gave; other methods are UNIMPLEMENTED. Thread-safe.
class FakeTextGeneration {
 public:
  struct Script {
    // Generate streams these in order; Complete answers them merged into one
    // response (ids and logprobs appended, text concatenated, the rest from
    // the last piece).
    std::vector<v1::GenerateResponse> pieces;
    // Ends the call after the pieces.
    grpc::Status status;
    // Generate only: after the pieces, keep the stream open until the client
    // cancels it.
    bool hold_open = false;
  };

  // Starts on 127.0.0.1 on a free port; null when gRPC cannot listen.
  static std::unique_ptr<FakeTextGeneration> Start();
  ~FakeTextGeneration();

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }

  // What later calls answer. The default script answers no pieces and OK.
  void SetScript(Script script);

  // What GetModelInfo answers from now on (UNIMPLEMENTED before).
  void SetModelInfo(v1::ModelInfo info);

  // The requests of the Generate and Complete calls so far, oldest first.
  std::vector<v1::GenerateRequest> requests() const;

  // Waits up to `timeout` for a client to cancel a Generate call; true if
  // one has.
  bool WaitForCancel(std::chrono::milliseconds timeout);

 private:
  class Service;
  FakeTextGeneration() = default;

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace h3::testing

#endif  // H3_TESTS_E2E_FAKE_SERVER_H_
