#include "engine/prefix_cache.h"

#include <utility>
#include <vector>

#include "base/status_macros.h"

namespace h3::engine {

struct PrefixCache::Node {
  Node* parent = nullptr;
  std::vector<int32_t> edge;  // the tokens this node adds to its parent's
  int64_t depth = 0;          // tokens from the root to this node's end
  Buffer kv;     // K/V of the edge's positions, packed as ReadKv lays it out
  Buffer state;  // every H3 layer's state at `depth`; empty: no snapshot
  absl::flat_hash_map<int32_t, std::unique_ptr<Node>> children;
  uint64_t used = 0;  // the clock when a snapshot at or below was last used

  int64_t length() const { return static_cast<int64_t>(edge.size()); }
  int64_t start() const { return depth - length(); }
};

PrefixCache::PrefixCache(SequenceMemory& memory, Model& model,
                         const PrefixCacheOptions& options)
    : memory_(memory),
      backend_(model.backend()),
      d_model_(model.config().d_model),
      kv_blocks_(2 * model.attention_layers()),
      kv_type_(memory.kv_type()),
      options_(options),
      root_(std::make_unique<Node>()) {
  stats_.max_bytes = options.max_bytes;
  stats_.interval = options.interval;
}

PrefixCache::~PrefixCache() = default;

PrefixCacheStats PrefixCache::stats() const { return stats_; }

std::optional<Buffer> PrefixCache::Allocate(int64_t floats) {
  if (floats == 0) return Buffer();
  absl::StatusOr<Buffer> buffer = backend_.Allocate(floats);
  if (!buffer.ok()) return std::nullopt;
  stats_.bytes += floats * static_cast<int64_t>(sizeof(float));
  return std::move(*buffer);
}

std::optional<Buffer> PrefixCache::AllocateKv(int64_t positions) {
  return Allocate(FloatsHolding(positions * kv_blocks_ * d_model_, kv_type_));
}

void PrefixCache::Free(Buffer& buffer) {
  stats_.bytes -= buffer.size() * static_cast<int64_t>(sizeof(float));
  buffer = Buffer();
}

PrefixCache::Node* PrefixCache::Walk(absl::Span<const int32_t> tokens,
                                     int64_t* matched) const {
  Node* node = root_.get();
  int64_t at = 0;
  const int64_t n = static_cast<int64_t>(tokens.size());
  while (at < n) {
    auto it = node->children.find(tokens[at]);
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    int64_t common = 0;
    while (common < child->length() && at + common < n &&
           child->edge[common] == tokens[at + common]) {
      ++common;
    }
    if (common < child->length()) {
      *matched = at + common;
      return node;
    }
    node = child;
    at += child->length();
  }
  *matched = at;
  return node;
}

void PrefixCache::Touch(Node* node) {
  ++clock_;
  for (; node != nullptr; node = node->parent) node->used = clock_;
}

absl::StatusOr<PrefixCache::Match> PrefixCache::Restore(
    absl::Span<const int32_t> tokens, int64_t limit, SlotId slot) {
  Match match;
  if (!enabled()) return match;
  ++stats_.queries;
  Node* node = Walk(tokens, &match.matched);
  while (node != root_.get() &&
         (node->state.size() == 0 || node->depth > limit)) {
    node = node->parent;
  }
  if (node == root_.get()) return match;
  for (const Node* n = node; n != root_.get(); n = n->parent) {
    if (n->kv.size() == 0) continue;
    H3_RETURN_IF_ERROR(
        memory_.WriteKv(slot, n->start(), n->length(), n->kv.data()));
  }
  H3_RETURN_IF_ERROR(memory_.WriteStates(slot, node->state.data()));
  memory_.SetPosition(slot, node->depth);
  Touch(node);
  match.restored = node->depth;
  stats_.hit_tokens += node->depth;
  return match;
}

absl::Status PrefixCache::Split(Node* node, int64_t keep) {
  const int64_t length = node->length();
  const int64_t rest = length - keep;
  auto tail = std::make_unique<Node>();
  Buffer head_kv;
  if (node->kv.size() > 0) {
    std::optional<Buffer> head = AllocateKv(keep);
    std::optional<Buffer> back = AllocateKv(rest);
    if (!head || !back) {
      return absl::ResourceExhaustedError("prefix cache: splitting K/V");
    }
    // The packed K and V blocks each split at `keep` positions.
    const ElementType t = kv_type_;
    const int64_t size = ElementSize(t);
    for (int b = 0; b < kv_blocks_; ++b) {
      const void* src = ElementAt(node->kv.data(), b * length * d_model_, t);
      H3_RETURN_IF_ERROR(
          backend_.CopyBytes(src, keep * d_model_ * size,
                             ElementAt(head->data(), b * keep * d_model_, t)));
      H3_RETURN_IF_ERROR(backend_.CopyBytes(
          ElementAt(src, keep * d_model_, t), rest * d_model_ * size,
          ElementAt(back->data(), b * rest * d_model_, t)));
    }
    Free(node->kv);
    head_kv = std::move(*head);
    tail->kv = std::move(*back);
  }
  tail->parent = node;
  tail->edge.assign(node->edge.begin() + keep, node->edge.end());
  tail->depth = node->depth;
  tail->used = node->used;
  tail->state = std::move(node->state);
  tail->children = std::move(node->children);
  for (auto& [token, child] : tail->children) child->parent = tail.get();
  node->kv = std::move(head_kv);
  node->state = Buffer();
  node->edge.resize(keep);
  node->depth -= rest;
  node->children.clear();
  const int32_t first = tail->edge.front();
  node->children.emplace(first, std::move(tail));
  return absl::OkStatus();
}

absl::Status PrefixCache::Save(SlotId slot, absl::Span<const int32_t> tokens) {
  if (!enabled() || tokens.empty()) return absl::OkStatus();
  const int64_t p = static_cast<int64_t>(tokens.size());
  if (memory_.position(slot) != p) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix cache: a snapshot of ", p, " tokens from slot ",
                     slot, " at position ", memory_.position(slot)));
  }
  int64_t matched = 0;
  Node* node = Walk(tokens, &matched);
  if (matched > node->depth) {
    // The tokens leave the tree inside an edge: end a node there.
    Node* child = node->children.at(tokens[node->depth]).get();
    absl::Status split = Split(child, matched - node->depth);
    if (absl::IsResourceExhausted(split)) return absl::OkStatus();
    H3_RETURN_IF_ERROR(split);
    node = child;
  }
  if (matched < p) {
    auto child = std::make_unique<Node>();
    child->parent = node;
    child->edge.assign(tokens.begin() + matched, tokens.end());
    child->depth = p;
    std::optional<Buffer> kv = AllocateKv(child->length());
    if (!kv) return absl::OkStatus();
    child->kv = std::move(*kv);
    if (child->kv.size() > 0) {
      H3_RETURN_IF_ERROR(
          memory_.ReadKv(slot, matched, child->length(), child->kv.data()));
    }
    Node* added = child.get();
    node->children.emplace(tokens[matched], std::move(child));
    node = added;
  }
  if (node->state.size() == 0) {
    std::optional<Buffer> state = Allocate(memory_.StateFloats());
    if (!state) {
      if (node->children.empty()) Drop(node);
      return absl::OkStatus();
    }
    node->state = std::move(*state);
    H3_RETURN_IF_ERROR(memory_.ReadStates(slot, node->state.data()));
    ++stats_.snapshots;
  }
  Touch(node);
  Evict(node);
  return absl::OkStatus();
}

void PrefixCache::Evict(Node* keep) {
  while (stats_.bytes > options_.max_bytes) {
    // The least recently used leaf, `keep` only when no other is left.
    Node* victim = nullptr;
    std::vector<Node*> stack = {root_.get()};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (auto& [token, child] : n->children) stack.push_back(child.get());
      if (n == root_.get() || n == keep || !n->children.empty()) continue;
      if (victim == nullptr || n->used < victim->used) victim = n;
    }
    if (victim == nullptr) {
      if (keep == nullptr || keep->parent == nullptr ||
          !keep->children.empty()) {
        return;
      }
      victim = keep;
      keep = nullptr;
    }
    Drop(victim);
  }
}

void PrefixCache::Drop(Node* leaf) {
  if (leaf->state.size() > 0) {
    Free(leaf->state);
    --stats_.snapshots;
    ++stats_.evictions;
  }
  // Then the K/V that no snapshot below needs any more.
  while (leaf != root_.get() && leaf->children.empty() &&
         leaf->state.size() == 0) {
    Node* parent = leaf->parent;
    Free(leaf->kv);
    parent->children.erase(leaf->edge.front());
    leaf = parent;
  }
}

}  // namespace h3::engine
