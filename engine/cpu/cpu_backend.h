#ifndef H3_ENGINE_CPU_CPU_BACKEND_H_
#define H3_ENGINE_CPU_CPU_BACKEND_H_

// Private to the CPU backend's files.

#include <memory>

#include "engine/backend.h"

namespace h3::engine {

// qkv and out of the layer's calls hold `activations` (fp32, fp16 or bf16).
std::unique_ptr<H3Layer> MakeCpuH3Layer(const kernels::H3Weights& weights,
                                        ElementType activations);

}  // namespace h3::engine

#endif  // H3_ENGINE_CPU_CPU_BACKEND_H_
