#ifndef H3_TESTS_E2E_BENCH_SUPPORT_H_
#define H3_TESTS_E2E_BENCH_SUPPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/fake_server.h"
#include "tests/support/subprocess.h"

namespace h3::testing {

// `H3 bench --server ADDRESS args... --json JSON_PATH`, killed after 120 s.
RunResult RunBench(const std::string& h3, const std::string& address,
                   std::vector<std::string> args, const std::string& json_path);

// The JSON document in `path`; an empty object (and a test failure) when
// the file holds none.
nlohmann::json ReadJsonFile(const std::string& path);

// A scripted server whose Generate streams one message per id of `ids` (one
// token each, the last with finish reason LENGTH) and then ends the call, or
// holds it open. Its model: a vocabulary of 100 with eos 0 and no bos,
// sequences and answers of at most 1000 tokens. Null when it cannot start.
std::unique_ptr<FakeTextGeneration> ScriptedServer(
    const std::vector<int32_t>& ids, bool hold_open);

}  // namespace h3::testing

#endif  // H3_TESTS_E2E_BENCH_SUPPORT_H_
