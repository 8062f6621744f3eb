#ifndef H3_TOKENIZER_SENTENCEPIECE_MODULE_LOADER_H_
#define H3_TOKENIZER_SENTENCEPIECE_MODULE_LOADER_H_

// Finds and loads h3_sentencepiece_module (sentencepiece_module_abi.h) into a
// link-map namespace of its own with dlmopen, so that the libsentencepiece it
// links, with its bundled protobuf-lite, never meets the process's
// libprotobuf.
//
// Errors are plain strings (the callers turn them into absl::Status).

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/sentencepiece_module_abi.h"

namespace h3::tokenizer::internal {

// The environment variable naming the module file; when set (non-empty), it
// is the only place looked at.
inline constexpr char kSentencePieceModuleEnv[] = "H3_SENTENCEPIECE_MODULE";

// Where the module is looked for, in order:
//   - `env_value` alone, when it is non-null and non-empty;
//   - otherwise the module's file name in the directory of `executable`,
//     then in `executable`'s ../lib/h3/ (the layout bin/ + lib/h3/, which the
//     build tree mirrors: the module builds into <build>/lib/h3/), then the
//     module's absolute path in the build tree it was built in (so that test
//     binaries in any build subdirectory find it). An empty `executable`
//     skips the first two.
std::vector<std::string> SentencePieceModuleCandidates(
    const char* env_value, const std::string& executable);

// The functions of one loaded module. Immutable after Open; every function
// may be called from many threads at once.
class SentencePieceModule {
 public:
  // Loads the first of `candidates` that exists into a new link-map
  // namespace and resolves its functions, refusing a module whose ABI
  // version is not H3SPM_ABI_VERSION (and then trying the next candidate).
  // On failure returns nullptr and sets *error to a message naming every
  // path tried and why it failed (dlerror() for one that does not load).
  static std::unique_ptr<SentencePieceModule> Open(
      const std::vector<std::string>& candidates, std::string* error);

  // The module of this process: opened on the first call, from
  // SentencePieceModuleCandidates($H3_SENTENCEPIECE_MODULE,
  // /proc/self/exe), and kept (never unloaded) until the process exits.
  // Later calls return the same module, or the same failure: nullptr with
  // *error set. Thread-safe.
  static const SentencePieceModule* ForProcess(std::string* error);

  // Unloads the module. REQUIRES: every model it loaded has been freed.
  ~SentencePieceModule();
  SentencePieceModule(const SentencePieceModule&) = delete;
  SentencePieceModule& operator=(const SentencePieceModule&) = delete;

  // The file it was loaded from.
  const std::string& path() const { return path_; }

  // The module's functions (sentencepiece_module_abi.h), never null.
  H3SpmLoadFn load = nullptr;
  H3SpmFreeFn free = nullptr;
  H3SpmLiveModelsFn live_models = nullptr;
  H3SpmPieceSizeFn piece_size = nullptr;
  H3SpmBosIdFn bos_id = nullptr;
  H3SpmEosIdFn eos_id = nullptr;
  H3SpmIsByteFn is_byte = nullptr;
  H3SpmIdToPieceFn id_to_piece = nullptr;
  H3SpmEncodeFn encode = nullptr;
  H3SpmDecodeFn decode = nullptr;

 private:
  SentencePieceModule() = default;
  // Loads `path`; false with *error set (not naming the path) on failure.
  bool Load(const std::string& path, std::string* error);

  void* handle_ = nullptr;  // from dlmopen
  std::string path_;
};

}  // namespace h3::tokenizer::internal

#endif  // H3_TOKENIZER_SENTENCEPIECE_MODULE_LOADER_H_
