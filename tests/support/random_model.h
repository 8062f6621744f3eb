#ifndef H3_TESTS_SUPPORT_RANDOM_MODEL_H_
#define H3_TESTS_SUPPORT_RANDOM_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "loader/config.h"

namespace h3::testing {

// A small hybrid shape for tests: d_model 16, 2 layers (attention at 1,
// 2 heads), head_dim 1, d_state 8, over `vocab_size` tokens (unpadded).
loader::ModelConfig SmallHybridConfig(int64_t vocab_size);

// Writes a model file (fp32, no tokenizer) for `config` with random weights
// shaped like a trained model's: unit-ish layer norms, small linear weights,
// SSM step sizes in [0.001, 0.1], A's real part near -0.5, rotary
// frequencies as the formula gives them. The same seed gives the same file.
absl::Status WriteRandomModel(const loader::ModelConfig& config,
                              const std::string& path, uint32_t seed = 7);

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_RANDOM_MODEL_H_
