#ifndef H3_ENGINE_CPU_CPU_BACKEND_H_
#define H3_ENGINE_CPU_CPU_BACKEND_H_

// Private to the CPU backend's files.

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend.h"

namespace h3::engine {

// qkv and out of the layer's calls hold `activations` (fp32, fp16 or bf16).
std::unique_ptr<H3Layer> MakeCpuH3Layer(const kernels::H3Weights& weights,
                                        ElementType activations);

// The CPU backend's 16-bit activations around fp32 kernels: `n` elements of
// `type` at `src` as fp32 into `dst` (resized to n), exactly; and `n` fp32
// values rounded to `type` (to nearest even) at `dst`.
absl::Status ToFloats(const void* src, ElementType type, int64_t n,
                      std::vector<float>& dst);
absl::Status FromFloats(const float* src, int64_t n, ElementType type,
                        void* dst);

}  // namespace h3::engine

#endif  // H3_ENGINE_CPU_CPU_BACKEND_H_
