#include "kernels/cuda/cublaslt_api.h"

#include <dlfcn.h>

namespace h3::kernels {
namespace {

struct Loaded {
  CublasLtApi api{};
  std::string error;
};

template <typename Fn>
bool Resolve(void* library, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (*fn == nullptr) *error = std::string("cuBLASLt lacks ") + name;
  return *fn != nullptr;
}

Loaded Load() {
  Loaded out;
  const std::string name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    out.error = "cannot open " + name + ": " + dlerror();
    return out;
  }
  CublasLtApi& a = out.api;
  std::string* e = &out.error;
#define H3_RESOLVE(fn) Resolve(library, #fn, &a.fn, e)
  H3_RESOLVE(cublasLtCreate) && H3_RESOLVE(cublasLtDestroy) &&
      H3_RESOLVE(cublasLtGetStatusName) &&
      H3_RESOLVE(cublasLtGetStatusString) && H3_RESOLVE(cublasLtMatmul) &&
      H3_RESOLVE(cublasLtMatmulAlgoCapGetAttribute) &&
      H3_RESOLVE(cublasLtMatmulAlgoCheck) &&
      H3_RESOLVE(cublasLtMatmulAlgoConfigGetAttribute) &&
      H3_RESOLVE(cublasLtMatmulAlgoConfigSetAttribute) &&
      H3_RESOLVE(cublasLtMatmulAlgoGetHeuristic) &&
      H3_RESOLVE(cublasLtMatmulDescCreate) &&
      H3_RESOLVE(cublasLtMatmulDescDestroy) &&
      H3_RESOLVE(cublasLtMatmulDescSetAttribute) &&
      H3_RESOLVE(cublasLtMatmulPreferenceCreate) &&
      H3_RESOLVE(cublasLtMatmulPreferenceDestroy) &&
      H3_RESOLVE(cublasLtMatmulPreferenceSetAttribute) &&
      H3_RESOLVE(cublasLtMatrixLayoutCreate) &&
      H3_RESOLVE(cublasLtMatrixLayoutDestroy);
#undef H3_RESOLVE
  return out;
}

}  // namespace

const CublasLtApi* LoadCublasLt(std::string* error) {
  static const Loaded* loaded = new Loaded(Load());
  if (!loaded->error.empty()) {
    *error = loaded->error;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace h3::kernels
