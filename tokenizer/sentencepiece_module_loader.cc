#include "tokenizer/sentencepiece_module_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

// Set by tokenizer/CMakeLists.txt.
#ifndef H3_SENTENCEPIECE_MODULE_FILE_NAME
#error "H3_SENTENCEPIECE_MODULE_FILE_NAME must name the module's file"
#endif
#ifndef H3_SENTENCEPIECE_MODULE_BUILD_PATH
#error "H3_SENTENCEPIECE_MODULE_BUILD_PATH must be the module's build path"
#endif

namespace h3::tokenizer::internal {
namespace {

// The path of the running executable, or "" if /proc is not there.
std::string ExecutablePath() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer));
  if (n <= 0 || static_cast<size_t>(n) >= sizeof(buffer)) return "";
  return std::string(buffer, n);
}

std::string DlError() {
  const char* message = dlerror();
  return message != nullptr ? message : "unknown dlopen error";
}

// Resolves `name` in `handle` into *fn; false with *error set if missing.
template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* fn, std::string* error) {
  dlerror();  // clear
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    *error = std::string("no symbol ") + name + ": " + DlError();
    return false;
  }
  // POSIX guarantees that a data pointer from dlsym converts to a function
  // pointer.
  *fn = reinterpret_cast<Fn>(symbol);
  return true;
}

}  // namespace

std::vector<std::string> SentencePieceModuleCandidates(
    const char* env_value, const std::string& executable) {
  if (env_value != nullptr && env_value[0] != '\0') return {env_value};
  namespace fs = std::filesystem;
  const fs::path file_name = H3_SENTENCEPIECE_MODULE_FILE_NAME;
  std::vector<std::string> candidates;
  if (!executable.empty()) {
    const fs::path dir = fs::path(executable).parent_path();
    candidates.push_back((dir / file_name).lexically_normal().string());
    candidates.push_back(
        (dir / ".." / "lib" / "h3" / file_name).lexically_normal().string());
  }
  const std::string build_path = H3_SENTENCEPIECE_MODULE_BUILD_PATH;
  if (std::find(candidates.begin(), candidates.end(), build_path) ==
      candidates.end()) {
    candidates.push_back(build_path);
  }
  return candidates;
}

bool SentencePieceModule::Load(const std::string& path, std::string* error) {
  if (access(path.c_str(), F_OK) != 0) {
    *error = "no such file";
    return false;
  }
  // A new namespace: the module gets its own libsentencepiece, libstdc++ and
  // libc, and none of its symbols are visible to the rest of the process.
  handle_ = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    *error = DlError();
    return false;
  }
  H3SpmAbiVersionFn abi_version = nullptr;
  if (!Resolve(handle_, H3SPM_ABI_VERSION_SYMBOL, &abi_version, error)) {
    return false;
  }
  if (abi_version() != H3SPM_ABI_VERSION) {
    *error = "ABI version " + std::to_string(abi_version()) +
             ", this program needs " + std::to_string(H3SPM_ABI_VERSION) +
             " (a module from another build?)";
    return false;
  }
  path_ = path;
  return Resolve(handle_, H3SPM_LOAD_SYMBOL, &load, error) &&
         Resolve(handle_, H3SPM_FREE_SYMBOL, &free, error) &&
         Resolve(handle_, H3SPM_LIVE_MODELS_SYMBOL, &live_models, error) &&
         Resolve(handle_, H3SPM_PIECE_SIZE_SYMBOL, &piece_size, error) &&
         Resolve(handle_, H3SPM_BOS_ID_SYMBOL, &bos_id, error) &&
         Resolve(handle_, H3SPM_EOS_ID_SYMBOL, &eos_id, error) &&
         Resolve(handle_, H3SPM_IS_BYTE_SYMBOL, &is_byte, error) &&
         Resolve(handle_, H3SPM_ID_TO_PIECE_SYMBOL, &id_to_piece, error) &&
         Resolve(handle_, H3SPM_ENCODE_SYMBOL, &encode, error) &&
         Resolve(handle_, H3SPM_DECODE_SYMBOL, &decode, error);
}

std::unique_ptr<SentencePieceModule> SentencePieceModule::Open(
    const std::vector<std::string>& candidates, std::string* error) {
  std::string tried;
  for (const std::string& path : candidates) {
    auto module = std::unique_ptr<SentencePieceModule>(new SentencePieceModule);
    std::string why;
    if (module->Load(path, &why)) return module;
    tried += "\n  " + path + ": " + why;
  }
  *error = "cannot load the sentencepiece module (" +
           std::string(H3_SENTENCEPIECE_MODULE_FILE_NAME) + "; set $" +
           kSentencePieceModuleEnv + " to its path). Tried:" +
           (tried.empty() ? std::string(" nothing") : tried);
  return nullptr;
}

const SentencePieceModule* SentencePieceModule::ForProcess(std::string* error) {
  struct Loaded {
    const SentencePieceModule* module = nullptr;
    std::string error;
  };
  // Never destroyed: tokenizers held by other static objects may still use
  // the module while the process exits.
  static const Loaded* const loaded = [] {
    auto* l = new Loaded;
    std::unique_ptr<SentencePieceModule> module =
        Open(SentencePieceModuleCandidates(std::getenv(kSentencePieceModuleEnv),
                                           ExecutablePath()),
             &l->error);
    l->module = module.release();
    return l;
  }();
  if (loaded->module == nullptr) *error = loaded->error;
  return loaded->module;
}

SentencePieceModule::~SentencePieceModule() {
  if (handle_ != nullptr) dlclose(handle_);
}

}  // namespace h3::tokenizer::internal
