#ifndef H3_TESTS_SUPPORT_GOLDEN_H_
#define H3_TESTS_SUPPORT_GOLDEN_H_

#include <string>

#include "nlohmann/json.hpp"

namespace h3::testing {

// The directory of the PyTorch reference's golden data and checkpoints
// (engine/testdata, written by tests/reference/h3_reference.py), under
// $H3_SOURCE_DIR when set (SourcePath, tests/support/source_path.h).
std::string EngineTestdata();

// The golden data of config `name` in engine/testdata/golden.json: config,
// vocab_size, padded_vocab_size, prompt, last_logits, greedy. Fails the
// current test (and returns null) if the file cannot be read.
nlohmann::json Golden(const std::string& name);

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_GOLDEN_H_
