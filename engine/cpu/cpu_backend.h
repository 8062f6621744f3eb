#ifndef H3_ENGINE_CPU_CPU_BACKEND_H_
#define H3_ENGINE_CPU_CPU_BACKEND_H_

// Private to the CPU backend's files.

#include <memory>

#include "engine/backend.h"

namespace h3::engine {

std::unique_ptr<H3Layer> MakeCpuH3Layer(const kernels::H3Weights& weights);

}  // namespace h3::engine

#endif  // H3_ENGINE_CPU_CPU_BACKEND_H_
