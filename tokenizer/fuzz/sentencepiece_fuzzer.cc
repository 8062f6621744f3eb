// libFuzzer target: any byte string as a sentencepiece model (.model), through
// h3_sentencepiece_module's C interface (sentencepiece_module_abi.h), linked
// in directly rather than loaded. A model that loads must answer for every
// piece and encode and decode a few texts, or refuse them with a message.
// Debian's libsentencepiece is not instrumented: the coverage libFuzzer sees
// is the module's, and ASan sees the library's heap use only.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tokenizer/sentencepiece_module_abi.h"

extern "C" {
H3SpmModel* h3spm_load(const char*, size_t, char*, size_t);
void h3spm_free(H3SpmModel*);
int32_t h3spm_piece_size(const H3SpmModel*);
int h3spm_is_byte(const H3SpmModel*, int32_t);
int64_t h3spm_id_to_piece(const H3SpmModel*, int32_t, char*, size_t);
int64_t h3spm_encode(const H3SpmModel*, const char*, size_t, int32_t*, size_t,
                     char*, size_t);
int64_t h3spm_decode(const H3SpmModel*, const int32_t*, size_t, char*, size_t,
                     char*, size_t);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char error[256];
  H3SpmModel* model = h3spm_load(reinterpret_cast<const char*>(data), size,
                                 error, sizeof(error));
  if (model == nullptr) return 0;
  const int32_t pieces = h3spm_piece_size(model);
  char piece[64];
  for (int32_t id = 0; id < pieces && id < 4096; ++id) {
    if (h3spm_id_to_piece(model, id, piece, sizeof(piece)) < 0) std::abort();
    (void)h3spm_is_byte(model, id);
  }
  if (h3spm_id_to_piece(model, pieces, piece, sizeof(piece)) != -1)
    std::abort();
  for (const std::string text :
       {"In the beginning", "", "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac",
        "<s> </s> <unk> \t\n  x"}) {
    std::vector<int32_t> ids(256);
    const int64_t n = h3spm_encode(model, text.data(), text.size(), ids.data(),
                                   ids.size(), error, sizeof(error));
    if (n < 0) continue;
    if (static_cast<size_t>(n) > ids.size()) continue;
    ids.resize(n);
    for (int32_t id : ids) {
      if (id < 0 || id >= pieces) std::abort();
    }
    std::string decoded(1024, '\0');
    (void)h3spm_decode(model, ids.data(), ids.size(), decoded.data(),
                       decoded.size(), error, sizeof(error));
  }
  h3spm_free(model);
  return 0;
}
