#ifndef H3_TESTS_SUPPORT_GOLDEN_ENGINE_H_
#define H3_TESTS_SUPPORT_GOLDEN_ENGINE_H_

#include <string>

#include "engine/backend.h"

namespace h3::testing {

// Runs golden config `name` (engine/testdata/<name>.safetensors, and its
// entry in golden.json, under EngineTestdata()) through the real path:
// safetensors -> h3 convert (fp32) -> model file -> Runner on a backend made
// by engine::MakeBackend(`options`), the prompt in one step with prefill
// chunks of 1024 and of 5 tokens. Expects the last prompt position's logits
// within `tolerance` * max(1, |PyTorch's|) of PyTorch's, and the greedy
// tokens after it exactly. Reports through GoogleTest; returns early when
// a step before the comparison fails.
void ExpectEngineMatchesGolden(const std::string& name,
                               const engine::BackendOptions& options,
                               double tolerance);

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_GOLDEN_ENGINE_H_
