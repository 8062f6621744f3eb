// h3_sentencepiece_module: Debian's libsentencepiece behind the plain C
// interface of sentencepiece_module_abi.h. Built as a shared module that
// h3_tokenizer loads into a link-map namespace of its own (see that header);
// nothing links it.
//
// The only file that includes sentencepiece's header, which defines
// `absl::string_view` as std::string_view and so clashes with Debian's
// abseil (whose string_view is its own class): no abseil header here, and
// nothing from h3 but the ABI header.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tokenizer/sentencepiece_module_abi.h"

// Only the h3spm_* functions are exported (the target builds with hidden
// visibility).
#define H3SPM_EXPORT extern "C" __attribute__((visibility("default")))

struct H3SpmModel {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

std::atomic<int64_t> live_models{0};

void CopyError(std::string_view message, char* error, size_t capacity) {
  if (capacity == 0) return;
  const size_t n = std::min(message.size(), capacity - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

// Copies n elements to `out`, which may be null when n is 0.
template <typename T>
void CopyOut(const T* from, size_t n, T* out) {
  if (n > 0) std::memcpy(out, from, n * sizeof(T));
}

// The message of the exception being handled, for catch (...) blocks.
std::string CurrentExceptionMessage() {
  try {
    throw;
  } catch (const std::exception& e) {
    return std::string("exception in sentencepiece: ") + e.what();
  } catch (...) {
    return "unknown exception in sentencepiece";
  }
}

}  // namespace

H3SPM_EXPORT int h3spm_abi_version(void) { return H3SPM_ABI_VERSION; }

H3SPM_EXPORT H3SpmModel* h3spm_load(const char* model, size_t model_size,
                                    char* error, size_t error_capacity) {
  try {
    auto loaded = std::make_unique<H3SpmModel>();
    const sentencepiece::util::Status status =
        loaded->processor.LoadFromSerializedProto(
            std::string_view(model, model_size));
    if (!status.ok()) {
      CopyError(status.ToString(), error, error_capacity);
      return nullptr;
    }
    live_models.fetch_add(1, std::memory_order_relaxed);
    return loaded.release();
  } catch (...) {
    CopyError(CurrentExceptionMessage(), error, error_capacity);
    return nullptr;
  }
}

H3SPM_EXPORT void h3spm_free(H3SpmModel* model) {
  if (model == nullptr) return;
  delete model;
  live_models.fetch_sub(1, std::memory_order_relaxed);
}

H3SPM_EXPORT int64_t h3spm_live_models(void) {
  return live_models.load(std::memory_order_relaxed);
}

H3SPM_EXPORT int32_t h3spm_piece_size(const H3SpmModel* model) {
  return model->processor.GetPieceSize();
}

H3SPM_EXPORT int32_t h3spm_bos_id(const H3SpmModel* model) {
  return model->processor.bos_id();
}

H3SPM_EXPORT int32_t h3spm_eos_id(const H3SpmModel* model) {
  return model->processor.eos_id();
}

H3SPM_EXPORT int h3spm_is_byte(const H3SpmModel* model, int32_t id) {
  if (id < 0 || id >= model->processor.GetPieceSize()) return 0;
  return model->processor.IsByte(id) ? 1 : 0;
}

H3SPM_EXPORT int64_t h3spm_id_to_piece(const H3SpmModel* model, int32_t id,
                                       char* piece, size_t capacity) {
  if (id < 0 || id >= model->processor.GetPieceSize()) return -1;
  // A reference into the model's own storage: no allocation, no exception.
  const std::string& spelling = model->processor.IdToPiece(id);
  CopyOut(spelling.data(), std::min(spelling.size(), capacity), piece);
  return static_cast<int64_t>(spelling.size());
}

H3SPM_EXPORT int64_t h3spm_encode(const H3SpmModel* model, const char* text,
                                  size_t text_size, int32_t* ids,
                                  size_t capacity, char* error,
                                  size_t error_capacity) {
  try {
    std::vector<int> encoded;
    const sentencepiece::util::Status status =
        model->processor.Encode(std::string_view(text, text_size), &encoded);
    if (!status.ok()) {
      CopyError(status.ToString(), error, error_capacity);
      return -1;
    }
    static_assert(sizeof(int) == sizeof(int32_t));
    CopyOut(encoded.data(), std::min(encoded.size(), capacity), ids);
    return static_cast<int64_t>(encoded.size());
  } catch (...) {
    CopyError(CurrentExceptionMessage(), error, error_capacity);
    return -1;
  }
}

H3SPM_EXPORT int64_t h3spm_decode(const H3SpmModel* model, const int32_t* ids,
                                  size_t id_count, char* text, size_t capacity,
                                  char* error, size_t error_capacity) {
  try {
    const std::vector<int> pieces(ids, ids + id_count);
    std::string decoded;
    const sentencepiece::util::Status status =
        model->processor.Decode(pieces, &decoded);
    if (!status.ok()) {
      CopyError(status.ToString(), error, error_capacity);
      return -1;
    }
    CopyOut(decoded.data(), std::min(decoded.size(), capacity), text);
    return static_cast<int64_t>(decoded.size());
  } catch (...) {
    CopyError(CurrentExceptionMessage(), error, error_capacity);
    return -1;
  }
}

// Every export has exactly the type the client casts its symbol to.
static_assert(std::is_same_v<decltype(&h3spm_abi_version), H3SpmAbiVersionFn>);
static_assert(std::is_same_v<decltype(&h3spm_load), H3SpmLoadFn>);
static_assert(std::is_same_v<decltype(&h3spm_free), H3SpmFreeFn>);
static_assert(std::is_same_v<decltype(&h3spm_live_models), H3SpmLiveModelsFn>);
static_assert(std::is_same_v<decltype(&h3spm_piece_size), H3SpmPieceSizeFn>);
static_assert(std::is_same_v<decltype(&h3spm_bos_id), H3SpmBosIdFn>);
static_assert(std::is_same_v<decltype(&h3spm_eos_id), H3SpmEosIdFn>);
static_assert(std::is_same_v<decltype(&h3spm_is_byte), H3SpmIsByteFn>);
static_assert(std::is_same_v<decltype(&h3spm_id_to_piece), H3SpmIdToPieceFn>);
static_assert(std::is_same_v<decltype(&h3spm_encode), H3SpmEncodeFn>);
static_assert(std::is_same_v<decltype(&h3spm_decode), H3SpmDecodeFn>);
