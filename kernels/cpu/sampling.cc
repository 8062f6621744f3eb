// Scaffold: replaced by the implementation.
#include "kernels/sampling.h"
namespace h3::kernels {
void SampleCpu(const SampleParams&) {}
}  // namespace h3::kernels
