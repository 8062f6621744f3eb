#ifndef H3_TOKENIZER_SENTENCEPIECE_MODULE_ABI_H_
#define H3_TOKENIZER_SENTENCEPIECE_MODULE_ABI_H_

// The C interface between h3_tokenizer (sentencepiece_library.cc) and the
// h3_sentencepiece_module shared object (sentencepiece_module.cc), which is
// the only thing linking Debian's libsentencepiece.
//
// Why a separate module: libsentencepiece.so.0 carries and exports its own
// protobuf-lite 3.14, which clashes with the libprotobuf 3.21 of gRPC and the
// h3.v1 API. The client loads the module with dlmopen(LM_ID_NEWLM), into a
// link-map namespace of its own, where libsentencepiece (and the module's own
// copies of libc, libstdc++ and libgcc_s) never meet libprotobuf.
//
// Rules that follow from two C/C++ runtimes in one process:
//   - arguments are plain C: pointers to caller-owned char or int32_t arrays
//     with their sizes, integers, and an opaque handle;
//   - nothing allocated on one side is freed on the other: variable-size
//     output goes into a caller buffer, and the call returns the size it
//     needed, so that a caller whose buffer was too small calls again with a
//     bigger one;
//   - no exception crosses the boundary: the module catches everything and
//     reports it as an error message.
// Error messages are written into the caller's `error` buffer of
// `error_capacity` bytes, truncated and always NUL-terminated (when
// error_capacity > 0).
//
// Plain C, no abseil, no sentencepiece: both sides include it.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Raised whenever a signature or a meaning below changes; the client refuses
// a module whose h3spm_abi_version() differs.
#define H3SPM_ABI_VERSION 1

// A loaded model, owned by the caller between h3spm_load and h3spm_free.
typedef struct H3SpmModel H3SpmModel;

// Returns H3SPM_ABI_VERSION as compiled into the module.
typedef int (*H3SpmAbiVersionFn)(void);

// Parses the serialized ModelProto model[0, model_size). Returns a new model,
// or NULL after writing the library's message into `error`. The model does
// not refer to `model` after the call.
typedef H3SpmModel* (*H3SpmLoadFn)(const char* model, size_t model_size,
                                   char* error, size_t error_capacity);

// Frees a model from h3spm_load. NULL is allowed.
typedef void (*H3SpmFreeFn)(H3SpmModel* model);

// The number of models loaded and not yet freed in this process; for tests
// that check handles are not leaked.
typedef int64_t (*H3SpmLiveModelsFn)(void);

// Vocabulary facts. bos/eos: -1 if the model has none. is_byte: 1 for a
// byte-fallback piece ("<0xAB>"), else 0 (also for an id out of range).
typedef int32_t (*H3SpmPieceSizeFn)(const H3SpmModel* model);
typedef int32_t (*H3SpmBosIdFn)(const H3SpmModel* model);
typedef int32_t (*H3SpmEosIdFn)(const H3SpmModel* model);
typedef int (*H3SpmIsByteFn)(const H3SpmModel* model, int32_t id);

// Copies the spelling of `id` (not NUL-terminated) into piece[0, capacity)
// and returns its length in bytes; only min(length, capacity) bytes are
// written. -1 if `id` is outside [0, piece size).
typedef int64_t (*H3SpmIdToPieceFn)(const H3SpmModel* model, int32_t id,
                                    char* piece, size_t capacity);

// Encodes text[0, text_size) into ids. Writes min(n, capacity) ids into
// ids[0, capacity) and returns n, the number of ids of the text: when
// n > capacity, call again with capacity >= n. Returns -1 after writing the
// library's message into `error`.
typedef int64_t (*H3SpmEncodeFn)(const H3SpmModel* model, const char* text,
                                 size_t text_size, int32_t* ids,
                                 size_t capacity, char* error,
                                 size_t error_capacity);

// Decodes ids[0, id_count) into text. Writes min(n, capacity) bytes (not
// NUL-terminated) into text[0, capacity) and returns n, the length of the
// decoded text: when n > capacity, call again with capacity >= n. Returns -1
// after writing the library's message into `error`. REQUIRES: every id in
// [0, piece size).
typedef int64_t (*H3SpmDecodeFn)(const H3SpmModel* model, const int32_t* ids,
                                 size_t id_count, char* text, size_t capacity,
                                 char* error, size_t error_capacity);

// The symbol names the module exports, one per typedef above.
#define H3SPM_ABI_VERSION_SYMBOL "h3spm_abi_version"
#define H3SPM_LOAD_SYMBOL "h3spm_load"
#define H3SPM_FREE_SYMBOL "h3spm_free"
#define H3SPM_LIVE_MODELS_SYMBOL "h3spm_live_models"
#define H3SPM_PIECE_SIZE_SYMBOL "h3spm_piece_size"
#define H3SPM_BOS_ID_SYMBOL "h3spm_bos_id"
#define H3SPM_EOS_ID_SYMBOL "h3spm_eos_id"
#define H3SPM_IS_BYTE_SYMBOL "h3spm_is_byte"
#define H3SPM_ID_TO_PIECE_SYMBOL "h3spm_id_to_piece"
#define H3SPM_ENCODE_SYMBOL "h3spm_encode"
#define H3SPM_DECODE_SYMBOL "h3spm_decode"

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // H3_TOKENIZER_SENTENCEPIECE_MODULE_ABI_H_
