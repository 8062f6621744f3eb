// Scaffold: replaced by the implementation.
#include "kernels/cuda/linear.h"
namespace h3::kernels {
struct LinearCuda::State {};
LinearCuda::LinearCuda(std::unique_ptr<State> state) : state_(std::move(state)) {}
LinearCuda::~LinearCuda() = default;
std::string LinearCuda::Create(const Options&, std::unique_ptr<LinearCuda>*) { return "not implemented"; }
std::string LinearCuda::Run(const LinearCudaParams&, cudaStream_t) { return "not implemented"; }
}  // namespace h3::kernels
