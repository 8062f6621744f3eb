#ifndef H3_ENGINE_PREFIX_CACHE_H_
#define H3_ENGINE_PREFIX_CACHE_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "engine/sequence_memory.h"

namespace h3::engine {

struct PrefixCacheOptions {
  // Bytes the snapshots may hold (states and K/V); 0 turns the cache off.
  int64_t max_bytes = 0;
  // When > 0 (at most 1), Runner::Create sets max_bytes to this fraction of
  // the backend's free memory once the slots are allocated.
  double memory_fraction = 0;
  // A snapshot every this many prompt tokens during a long prefill (0:
  // none); docs/prefix-cache.md has the measurement behind the default.
  int64_t interval = 512;
};

// What the cache holds and has done since it was made.
struct PrefixCacheStats {
  int64_t queries = 0;     // Restore calls
  int64_t hit_tokens = 0;  // tokens restored instead of computed
  int64_t snapshots = 0;   // H3 state snapshots held
  int64_t bytes = 0;       // states and K/V held
  int64_t evictions = 0;   // snapshots dropped to make room
  int64_t max_bytes = 0;
  int64_t interval = 0;
};

// Snapshots of sequences at exact token positions, in a radix tree over
// token ids (docs/prefix-cache.md). A node ends at some position p of the
// token paths through it and holds the attention layers' K/V of the
// positions its edge adds, so K/V is stored once however many snapshots
// share the path; a node may also hold every H3 layer's state at p, which
// makes it a snapshot a sequence can restore and go on from.
//
// Eviction drops the least recently used snapshot that no longer one
// extends (a leaf), then the K/V no snapshot needs any more. Saving may pass
// max_bytes by one snapshot until that eviction; a save that cannot be
// allocated is skipped, never an error for the request.
//
// Not thread-safe: the Runner's thread uses it with the memory it copies
// from and to.
class PrefixCache {
 public:
  PrefixCache(SequenceMemory& memory, Model& model,
              const PrefixCacheOptions& options);
  ~PrefixCache();

  bool enabled() const { return options_.max_bytes > 0; }
  const PrefixCacheOptions& options() const { return options_; }

  struct Match {
    int64_t restored = 0;  // tokens of the snapshot restored (0: none)
    int64_t matched = 0;   // tokens of the query the tree's paths share
  };
  // Restores into `slot` (acquired, at position 0) the deepest snapshot of
  // tokens[0, p) with p <= limit, and sets its position to p. Counts a
  // query, and p hit tokens. The match tells the caller where its tokens
  // leave the cached paths, which is where a snapshot would help the next
  // request most.
  absl::StatusOr<Match> Restore(absl::Span<const int32_t> tokens, int64_t limit,
                                SlotId slot);

  // Saves `slot` as the snapshot of `tokens`, the tokens it was fed
  // (tokens.size() == its position). A snapshot already there is only
  // marked as used. Then evicts down to max_bytes. Allocation failures are
  // not errors (the snapshot is skipped); copy failures are.
  absl::Status Save(SlotId slot, absl::Span<const int32_t> tokens);

  PrefixCacheStats stats() const;

 private:
  struct Node;

  // The deepest node whose whole path prefixes `tokens`; *matched gets the
  // tokens shared with the tree, counting a partial edge.
  Node* Walk(absl::Span<const int32_t> tokens, int64_t* matched) const;
  // Splits `node`'s edge after `keep` tokens: node keeps the first part
  // and gets a child with the rest (its K/V, state and children).
  absl::Status Split(Node* node, int64_t keep);
  absl::Status AddChild(Node* parent, SlotId slot,
                        absl::Span<const int32_t> tokens, Node** child);
  void Touch(Node* node);
  // Drops least recently used snapshot leaves until the budget holds;
  // `keep` is dropped only when nothing else is left.
  void Evict(Node* keep);
  void Drop(Node* leaf);
  // A new buffer of `floats`, counted in stats_.bytes; null when it cannot
  // be allocated.
  std::optional<Buffer> Allocate(int64_t floats);
  // A buffer for the K/V of `positions` positions, packed as ReadKv lays it
  // out (in the memory's K/V type).
  std::optional<Buffer> AllocateKv(int64_t positions);
  void Free(Buffer& buffer);

  SequenceMemory& memory_;
  Backend& backend_;
  const int64_t d_model_;
  const int kv_blocks_;  // K and V of every attention layer
  const ElementType kv_type_;
  const PrefixCacheOptions options_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_PREFIX_CACHE_H_
