#ifndef H3_TOKENIZER_GPT2_BPE_H_
#define H3_TOKENIZER_GPT2_BPE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "tokenizer/gpt2_pretokenizer.h"
#include "tokenizer/gpt2_vocab_files.h"
#include "tokenizer/tokenizer.h"

namespace h3::tokenizer {

// GPT-2's byte-level BPE: text is split by Gpt2PreTokenizer, each piece's
// UTF-8 bytes start as one token per byte, and adjacent pairs are merged,
// lowest merge rank first (all occurrences of a pair left to right), until no
// pair has a merge. Results per piece are cached.
//
// Thread-safe: Encode may run on many threads at once; the cache is sharded
// and locked.
class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // DataLoss if the vocabulary is inconsistent: a byte without a
  // single-byte token, a merge whose halves or result are not tokens, two
  // spellings of one id, or a spelling outside the byte-level alphabet.
  static absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Create(
      const Gpt2Vocabulary& vocabulary);

  absl::string_view kind() const override { return "gpt2-bpe"; }
  int32_t vocab_size() const override {
    return static_cast<int32_t>(id_to_bytes_.size());
  }
  int32_t eos_id() const override { return eos_id_; }
  int32_t bos_id() const override { return -1; }
  absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const override;
  bool EndsInsideCharacter(absl::Span<const int32_t> ids) const override;
  absl::StatusOr<std::string> TokenText(int32_t id) const override;

 protected:
  absl::StatusOr<std::vector<int32_t>> EncodeValidUtf8(
      absl::string_view text, const EncodeOptions& options) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  struct AddedToken {
    std::string content;
    int32_t id;
    bool special;
  };
  // One part of the BPE cache; pieces hash to one of kCacheShards.
  struct CacheShard {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, std::vector<int32_t>> map
        ABSL_GUARDED_BY(mu);
  };
  static constexpr int kCacheShards = 32;
  // A shard is cleared when it reaches this many pieces, bounding memory at
  // a few MB however varied the text.
  static constexpr size_t kCacheEntriesPerShard = 8192;
  // Longer pieces are rare (long runs of one symbol) and not worth keeping.
  static constexpr size_t kMaxCachedPieceBytes = 64;

  Gpt2BpeTokenizer() = default;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  // Appends the BPE tokens of one pre-tokenized piece.
  void EncodePiece(absl::string_view piece, std::vector<int32_t>* out) const;
  void Bpe(absl::string_view piece, std::vector<int32_t>* out) const;
  // Encodes text that contains no added token to match.
  void EncodeOrdinary(absl::string_view text, std::vector<int32_t>* out) const;

  Gpt2PreTokenizer pretokenizer_;
  std::vector<std::string> id_to_bytes_;     // "" for ids without a token
  std::vector<std::string> id_to_spelling_;  // as in the vocabulary files
  std::vector<bool> id_exists_;
  std::array<int32_t, 256> byte_to_id_{};
  absl::flat_hash_map<uint64_t, Merge> merges_;  // PairKey -> merge
  std::vector<AddedToken> added_tokens_;
  int32_t eos_id_ = -1;
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_GPT2_BPE_H_
