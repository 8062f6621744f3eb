#include "tokenizer/gpt2_bpe.h"

#include <algorithm>
#include <queue>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tokenizer/bytes_to_unicode.h"
#include "tokenizer/utf8.h"

namespace h3::tokenizer {

absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::Create(
    const Gpt2Vocabulary& vocabulary) {
  auto t = std::unique_ptr<Gpt2BpeTokenizer>(new Gpt2BpeTokenizer());
  int32_t max_id = -1;
  for (const auto& [spelling, id] : vocabulary.tokens)
    max_id = std::max(max_id, id);
  for (const auto& added : vocabulary.added_tokens)
    max_id = std::max(max_id, added.id);
  if (max_id < 0) return absl::DataLossError("the vocabulary is empty");
  const size_t size = static_cast<size_t>(max_id) + 1;
  t->id_to_bytes_.resize(size);
  t->id_to_spelling_.resize(size);
  t->id_exists_.assign(size, false);

  absl::flat_hash_map<std::string, int32_t> spelling_to_id;
  spelling_to_id.reserve(vocabulary.tokens.size());
  for (const auto& [spelling, id] : vocabulary.tokens) {
    if (t->id_exists_[id]) {
      return absl::DataLossError(
          absl::StrCat("the vocabulary gives id ", id, " to both \"",
                       t->id_to_spelling_[id], "\" and \"", spelling, "\""));
    }
    std::optional<std::string> bytes = ByteLevelToBytes(spelling);
    if (!bytes.has_value()) {
      return absl::DataLossError(absl::StrCat(
          "vocabulary entry \"", spelling,
          "\" has characters outside GPT-2's byte-level alphabet"));
    }
    t->id_to_bytes_[id] = *std::move(bytes);
    t->id_to_spelling_[id] = spelling;
    t->id_exists_[id] = true;
    spelling_to_id.emplace(spelling, id);
  }
  for (int b = 0; b < 256; ++b) {
    const std::string spelling =
        BytesToByteLevel(std::string(1, static_cast<char>(b)));
    auto it = spelling_to_id.find(spelling);
    if (it == spelling_to_id.end()) {
      return absl::DataLossError(absl::StrCat(
          "the vocabulary has no token for byte ", b, " (\"", spelling, "\")"));
    }
    t->byte_to_id_[b] = it->second;
  }
  t->merges_.reserve(vocabulary.merges.size());
  for (size_t rank = 0; rank < vocabulary.merges.size(); ++rank) {
    const auto& [left, right] = vocabulary.merges[rank];
    const std::string result = left + right;
    auto l = spelling_to_id.find(left);
    auto r = spelling_to_id.find(right);
    auto m = spelling_to_id.find(result);
    if (l == spelling_to_id.end() || r == spelling_to_id.end() ||
        m == spelling_to_id.end()) {
      return absl::DataLossError(absl::StrCat(
          "merge ", rank, " (\"", left, "\" + \"", right, "\"): \"",
          l == spelling_to_id.end()   ? left
          : r == spelling_to_id.end() ? right
                                      : result,
          "\" is not in the vocabulary"));
    }
    // A pair listed twice keeps its last rank, as in the reference encoders.
    t->merges_[PairKey(l->second, r->second)] = {static_cast<int32_t>(rank),
                                                 m->second};
  }
  for (const auto& added : vocabulary.added_tokens) {
    if (!t->id_exists_[added.id]) {
      t->id_to_bytes_[added.id] = added.content;
      t->id_to_spelling_[added.id] = added.content;
      t->id_exists_[added.id] = true;
    }
    t->added_tokens_.push_back({added.content, added.id, added.special});
  }
  t->eos_id_ = vocabulary.eos_id;
  return t;
}

absl::StatusOr<std::vector<int32_t>> Gpt2BpeTokenizer::EncodeValidUtf8(
    absl::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    // The earliest added token at or after `pos`, the longest on a tie.
    size_t best_at = absl::string_view::npos;
    const AddedToken* best = nullptr;
    for (const AddedToken& added : added_tokens_) {
      if (added.special && !options.parse_special) continue;
      const size_t at = text.find(added.content, pos);
      if (at == absl::string_view::npos) continue;
      if (best == nullptr || at < best_at ||
          (at == best_at && added.content.size() > best->content.size())) {
        best = &added;
        best_at = at;
      }
    }
    if (best == nullptr) {
      EncodeOrdinary(text.substr(pos), &ids);
      break;
    }
    EncodeOrdinary(text.substr(pos, best_at - pos), &ids);
    ids.push_back(best->id);
    pos = best_at + best->content.size();
  }
  return ids;
}

void Gpt2BpeTokenizer::EncodeOrdinary(absl::string_view text,
                                      std::vector<int32_t>* out) const {
  if (text.empty()) return;
  std::vector<absl::string_view> pieces;
  pretokenizer_.Split(text, &pieces);
  for (absl::string_view piece : pieces) EncodePiece(piece, out);
}

void Gpt2BpeTokenizer::EncodePiece(absl::string_view piece,
                                   std::vector<int32_t>* out) const {
  if (piece.size() == 1) {
    out->push_back(byte_to_id_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    Bpe(piece, out);
    return;
  }
  // Debian's abseil has its own string_view, which its hash maps expect.
  const absl::string_view key(piece.data(), piece.size());
  CacheShard& shard = cache_[absl::HashOf(key) % kCacheShards];
  {
    absl::ReaderMutexLock lock(&shard.mu);
    auto it = shard.map.find(key);
    if (it != shard.map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out->size();
  Bpe(piece, out);
  absl::MutexLock lock(&shard.mu);
  if (shard.map.size() >= kCacheEntriesPerShard) shard.map.clear();
  shard.map.try_emplace(std::string(piece), out->begin() + start, out->end());
}

void Gpt2BpeTokenizer::Bpe(absl::string_view piece,
                           std::vector<int32_t>* out) const {
  // The piece as a doubly linked list of symbols, one per byte at first;
  // a merged-away symbol gets id -1.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;  // -1 at the end
  };
  const int32_t n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_to_id_[static_cast<uint8_t>(piece[i])], i - 1,
                  i + 1 < n ? i + 1 : -1};
  }
  // Candidate merges of the pair starting at symbol `left`, popped lowest
  // rank first and, within a rank (that is, one pair), leftmost first, which
  // merges every occurrence of the best pair left to right like the
  // reference. Entries go stale when a neighbour changes; they are checked
  // when popped.
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t left_id;
    int32_t right_id;
    int32_t result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t left) {
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    auto it = merges_.find(PairKey(symbols[left].id, symbols[right].id));
    if (it == merges_.end()) return;
    heap.push({it->second.rank, left, symbols[left].id, symbols[right].id,
               it->second.result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    if (left.id != c.left_id || left.next < 0 ||
        symbols[left.next].id != c.right_id) {
      continue;  // stale
    }
    Symbol& right = symbols[left.next];
    right.id = -1;
    left.id = c.result;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    if (left.prev >= 0) push(left.prev);
    push(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next)
    out->push_back(symbols[i].id);
}

absl::StatusOr<std::string> Gpt2BpeTokenizer::Decode(
    absl::Span<const int32_t> ids) const {
  std::string bytes;
  for (const int32_t id : ids) {
    H3_RETURN_IF_ERROR(CheckTokenId(id, vocab_size()));
    if (!id_exists_[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " has no token in this vocabulary"));
    }
    bytes += id_to_bytes_[id];
  }
  return ReplaceInvalidUtf8(bytes);
}

bool Gpt2BpeTokenizer::EndsInsideCharacter(
    absl::Span<const int32_t> ids) const {
  // An unfinished character is at most 3 bytes: collect up to the last 3.
  std::string tail;
  for (size_t i = ids.size(); i-- > 0 && tail.size() < 3;) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) return false;
    tail.insert(0, id_to_bytes_[ids[i]]);
  }
  return IncompleteUtf8Suffix(tail) > 0;
}

absl::StatusOr<std::string> Gpt2BpeTokenizer::TokenText(int32_t id) const {
  H3_RETURN_IF_ERROR(CheckTokenId(id, vocab_size()));
  return id_to_spelling_[id];
}

}  // namespace h3::tokenizer
