// Fibers switch by _setjmp/_longjmp between stacks (no signal-mask system
// call per switch, as swapcontext makes); glibc's fortified longjmp would
// refuse a jump to another stack.
#undef _FORTIFY_SOURCE
#include "kernels/cuda/emulator/fibers.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define H3_EMULATOR_ASAN 1
#endif

namespace h3::emulator {
namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kGuardBytes = 4096;  // below each stack: overflow faults
constexpr size_t kSharedAlign = 256;
// An H100's limits on a launch.
constexpr unsigned kMaxBlockXY = 1024, kMaxBlockZ = 64, kMaxGridYZ = 65535;
constexpr unsigned kMaxCluster = 8;  // the portable cluster size

enum class Wait { kNone, kBlock, kCluster, kWarp, kDone };

struct Fiber {
  ucontext_t context;  // its start (makecontext)
  jmp_buf jump;        // where it waits
  bool started = false;
  unsigned char* stack = nullptr;  // kStackBytes
  uint3 index{};
  int block = 0;   // its block's rank in the cluster
  int linear = 0;  // threadIdx as a linear index
  Wait wait = Wait::kNone;
  // Its cp.async copies (AsyncCopy): committed groups, oldest first, and
  // the copies not yet committed.
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  std::deque<std::vector<Copy>> copy_groups;
  std::vector<Copy> copies;
};

// Lanes waiting at one collective: those of `mask` that have arrived.
struct Group {
  unsigned mask = 0;
  unsigned arrived = 0;
  const char* what = nullptr;
  Combine combine = nullptr;
};

// Collectives on disjoint masks may wait at once (divergent halves of a
// warp each at their own); a lane is in at most one group, so the lanes'
// slots serve them all.
struct Warp {
  int first = 0;         // the launch's fiber of lane 0
  unsigned present = 0;  // lanes that exist (a block's last warp may be short)
  unsigned exited = 0;   // lanes that have returned
  std::vector<Group> groups;
  Lane lanes[32];
};

// Stacks for the fibers of a block (or of a cluster's blocks), each above
// a guard page.
class Stacks {
 public:
  explicit Stacks(int count) : bytes_(count * (kStackBytes + kGuardBytes)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("emulator: mmap");
      std::abort();
    }
    base_ = static_cast<unsigned char*>(p);
    for (int i = 0; i < count; ++i) {
      if (mprotect(base_ + i * (kStackBytes + kGuardBytes), kGuardBytes,
                   PROT_NONE) != 0) {
        std::perror("emulator: mprotect");
        std::abort();
      }
    }
  }
  ~Stacks() { munmap(base_, bytes_); }
  Stacks(const Stacks&) = delete;
  Stacks& operator=(const Stacks&) = delete;

  unsigned char* stack(int i) const {
    return base_ + i * (kStackBytes + kGuardBytes) + kGuardBytes;
  }

 private:
  size_t bytes_;
  unsigned char* base_;
};

// One block of the cluster running (a cluster of one without clusters).
struct Block {
  uint3 index{};
  unsigned char* shared = nullptr;  // its dynamic shared memory
  // Its static __shared__ arrays declared with H3_SHARED_ARRAY, by tag.
  std::vector<std::pair<const void*, std::vector<unsigned char>>> statics;
  int first = 0;    // its fibers: [first, first + threads)
  int live = 0;     // its threads that have not returned
  int waiting = 0;  // ... waiting at __syncthreads
  std::vector<Warp> warps;
};

struct Launch {
  dim3 grid, block;
  size_t shared_bytes = 0;
  const std::function<void()>* kernel = nullptr;
  std::vector<Block> blocks;  // the cluster's, by rank
  std::vector<Fiber> fibers;  // every thread of the cluster
  jmp_buf scheduler;
  Fiber* current = nullptr;
  int live = 0;             // the cluster's threads that have not returned
  int cluster_waiting = 0;  // ... waiting at cluster.sync()
  std::string error;
  ucontext_t start;  // getcontext's, copied for each fiber
#if defined(H3_EMULATOR_ASAN)
  void* fake_stack = nullptr;         // the scheduler's
  const void* main_bottom = nullptr;  // the scheduler's stack
  size_t main_size = 0;
#endif
};

thread_local Launch* g_launch = nullptr;
thread_local std::string g_last_error;
thread_local Order g_default_order = Order::kForward;

Launch& Current() {
  if (g_launch == nullptr || g_launch->current == nullptr) {
    std::fprintf(stderr, "emulator: device code called outside Run\n");
    std::abort();
  }
  return *g_launch;
}

Block& BlockOf(Launch& l, const Fiber& f) { return l.blocks[f.block]; }
Warp& WarpOf(Launch& l, const Fiber& f) {
  return l.blocks[f.block].warps[f.linear / 32];
}

std::string Where(const Launch& l, const Fiber& f) {
  const uint3& b = l.blocks[f.block].index;
  char text[96];
  std::snprintf(text, sizeof text, " (block %u,%u,%u thread %u,%u,%u)", b.x,
                b.y, b.z, f.index.x, f.index.y, f.index.z);
  return text;
}

// From the running fiber to the scheduler; returns when it is run again.
void Yield(Launch& l) {
#if defined(H3_EMULATOR_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, l.main_bottom, l.main_size);
#endif
  if (_setjmp(l.current->jump) == 0) _longjmp(l.scheduler, 1);
#if defined(H3_EMULATOR_ASAN)
  __sanitizer_finish_switch_fiber(fake, &l.main_bottom, &l.main_size);
#endif
}

// From a fiber that will never run again to the scheduler.
[[noreturn]] void Leave(Launch& l) {
#if defined(H3_EMULATOR_ASAN)
  __sanitizer_start_switch_fiber(nullptr, l.main_bottom, l.main_size);
#endif
  _longjmp(l.scheduler, 1);
}

// From the scheduler to fiber f until it waits or ends.
void Resume(Launch& l, Fiber& f) {
  l.current = &f;
#if defined(H3_EMULATOR_ASAN)
  __sanitizer_start_switch_fiber(&l.fake_stack, f.stack, kStackBytes);
#endif
  if (_setjmp(l.scheduler) == 0) {
    if (!f.started) {
      f.started = true;
      setcontext(&f.context);
      std::perror("emulator: setcontext");
      std::abort();
    }
    _longjmp(f.jump, 1);
  }
#if defined(H3_EMULATOR_ASAN)
  __sanitizer_finish_switch_fiber(l.fake_stack, nullptr, nullptr);
#endif
}

// Ends the launch with the error a + b + c and where; the fiber's frames
// are abandoned, so callers pass no owning temporaries.
[[noreturn]] void Fail(Launch& l, const char* a, const char* b = "",
                       const char* c = "") {
  if (l.error.empty()) {
    l.error = std::string(a) + b + c + Where(l, *l.current);
  }
  l.current->wait = Wait::kDone;
  Leave(l);
}

// Releases block b's __syncthreads once every live thread of it waits
// there, and the cluster's barrier once every live thread of the cluster
// waits at it.
void ReleaseBarriers(Launch& l, int b) {
  Block& block = l.blocks[b];
  if (block.waiting > 0 && block.waiting >= block.live) {
    for (Fiber& f : l.fibers) {
      if (f.block == b && f.wait == Wait::kBlock) f.wait = Wait::kNone;
    }
    block.waiting = 0;
  }
  if (l.cluster_waiting > 0 && l.cluster_waiting >= l.live) {
    for (Fiber& f : l.fibers) {
      if (f.wait == Wait::kCluster) f.wait = Wait::kNone;
    }
    l.cluster_waiting = 0;
  }
}

// A barrier (`what`) reached by a lane its warp waits for at a collective:
// a deadlock on the GPU.
void FailIfTheWarpWaits(Launch& l, const Fiber& f, const char* what) {
  for (const Group& g : WarpOf(l, f).groups) {
    if (g.mask >> (f.linear % 32) & 1u) {
      Fail(l, what, " while the warp waits for this lane at ", g.what);
    }
  }
}

// Runs group g's combine and releases its lanes once every lane of its
// mask that exists and has not returned has arrived; the lanes that did
// take part are the combine's mask.
void ReleaseIfComplete(Launch& l, Warp& w, size_t g) {
  const Group group = w.groups[g];
  const unsigned needed = group.mask & w.present & ~w.exited;
  if ((group.arrived & needed) != needed) return;
  if (const char* wrong = group.combine(w.lanes, group.arrived)) {
    Fail(l, group.what, ": ", wrong);
  }
  w.groups.erase(w.groups.begin() + static_cast<std::ptrdiff_t>(g));
  for (int i = 0; i < 32; ++i) {
    if (group.arrived >> i & 1u) l.fibers[w.first + i].wait = Wait::kNone;
  }
}

// A block whose threads have all returned: its shared memory is gone on a
// GPU, so it is refilled with 0xff here (a pointer another block of the
// cluster mapped before reads NaN), and MapSharedRank refuses it.
void Retire(Launch& l, Block& block) {
  if (block.shared != nullptr && l.shared_bytes > 0) {
    std::memset(block.shared, 0xff, l.shared_bytes);
  }
  for (auto& [tag, buffer] : block.statics) {
    std::fill(buffer.begin(), buffer.end(), static_cast<unsigned char>(0xff));
  }
}

void FiberMain() {
  Launch& l = *g_launch;
#if defined(H3_EMULATOR_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &l.main_bottom, &l.main_size);
#endif
  (*l.kernel)();
  Fiber& f = *l.current;
  f.wait = Wait::kDone;
  --l.live;
  if (--BlockOf(l, f).live == 0) Retire(l, BlockOf(l, f));
  // Collectives need only the lanes that have not returned (CUDA's
  // "non-exited threads named in mask"): this one may complete some.
  const int lane = f.linear % 32;
  Warp& w = WarpOf(l, f);
  w.exited |= 1u << lane;
  for (size_t g = w.groups.size(); g-- > 0;) {
    if (w.groups[g].mask >> lane & 1u) ReleaseIfComplete(l, w, g);
  }
  ReleaseBarriers(l, f.block);
  Leave(l);
}

std::string Deadlock(const Launch& l) {
  std::string text = "deadlock:";
  int at_cluster = 0;
  for (const Fiber& f : l.fibers) at_cluster += f.wait == Wait::kCluster;
  if (at_cluster > 0) {
    text += " " + std::to_string(at_cluster) + " threads at cluster.sync;";
  }
  for (const Block& b : l.blocks) {
    char line[192];
    std::snprintf(line, sizeof line, " block %u,%u,%u:", b.index.x, b.index.y,
                  b.index.z);
    text += line;
    if (b.waiting > 0) {
      text += " " + std::to_string(b.waiting) + " of " +
              std::to_string(b.live) + " live threads at __syncthreads;";
    }
    for (size_t i = 0; i < b.warps.size(); ++i) {
      for (const Group& g : b.warps[i].groups) {
        std::snprintf(line, sizeof line,
                      " warp %zu at %s with lanes 0x%08x of mask 0x%08x;", i,
                      g.what, g.arrived, g.mask);
        text += line;
      }
    }
  }
  return text;
}

// Runs the cluster of l.blocks (their indexes set); false when it failed
// (l.error).
bool RunCluster(Launch& l, const Stacks& stacks, Order order) {
  const int threads = static_cast<int>(l.fibers.size() / l.blocks.size());
  for (size_t b = 0; b < l.blocks.size(); ++b) {
    Block& block = l.blocks[b];
    if (l.shared_bytes > 0) std::memset(block.shared, 0xff, l.shared_bytes);
    block.statics.clear();
    block.first = static_cast<int>(b) * threads;
    block.live = threads;
    block.waiting = 0;
    block.warps.resize((threads + 31) / 32);
    for (size_t i = 0; i < block.warps.size(); ++i) {
      Warp& w = block.warps[i];
      const int lanes = std::min(32, threads - static_cast<int>(32 * i));
      w.first = block.first + static_cast<int>(32 * i);
      w.present = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
      w.exited = 0;
      w.groups.clear();
    }
  }
  const int n = static_cast<int>(l.fibers.size());
  for (int i = 0; i < n; ++i) {
    Fiber& f = l.fibers[i];
    const int t = i % threads;
    f.index = {t % l.block.x, t / l.block.x % l.block.y,
               t / (l.block.x * l.block.y)};
    f.block = i / threads;
    f.linear = t;
    f.wait = Wait::kNone;
    f.started = false;
    f.copy_groups.clear();
    f.copies.clear();
    f.stack = stacks.stack(i);
    f.context = l.start;
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, &FiberMain, 0);
  }
  l.live = n;
  l.cluster_waiting = 0;
  for (;;) {
    bool ran = false;
    for (int k = 0; k < n; ++k) {
      Fiber& f = l.fibers[order == Order::kForward ? k : n - 1 - k];
      if (f.wait != Wait::kNone) continue;
      Resume(l, f);
      ran = true;
      if (!l.error.empty()) return false;
    }
    if (l.live == 0) return true;
    if (!ran) {
      l.error = Deadlock(l);
      return false;
    }
  }
}

// "" when an H100 takes the launch, else why not.
std::string CheckConfiguration(dim3 grid, dim3 block, size_t shared_bytes,
                               unsigned cluster) {
  const size_t threads = size_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || block.x > kMaxBlockXY ||
      block.y > kMaxBlockXY || block.z > kMaxBlockZ) {
    return "invalid launch configuration: block of " + std::to_string(block.x) +
           " x " + std::to_string(block.y) + " x " + std::to_string(block.z) +
           " (at most 1024 threads, z at most 64)";
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > kMaxGridYZ ||
      grid.z > kMaxGridYZ) {
    return "invalid launch configuration: grid of " + std::to_string(grid.x) +
           " x " + std::to_string(grid.y) + " x " + std::to_string(grid.z) +
           " (y and z at most 65535)";
  }
  if (shared_bytes > kMaxDynamicShared) {
    return "invalid launch configuration: " + std::to_string(shared_bytes) +
           " bytes of dynamic shared memory (at most " +
           std::to_string(kMaxDynamicShared) + ")";
  }
  if (cluster == 0 || cluster > kMaxCluster || grid.x % cluster != 0) {
    return "invalid launch configuration: clusters of " +
           std::to_string(cluster) + " blocks (1 to 8, dividing grid.x " +
           std::to_string(grid.x) + ")";
  }
  return "";
}

}  // namespace

Order DefaultOrder() { return g_default_order; }

ScopedOrder::ScopedOrder(Order order) : previous_(g_default_order) {
  g_default_order = order;
}
ScopedOrder::~ScopedOrder() { g_default_order = previous_; }

namespace {

std::mutex g_limits_mutex;
std::map<const void*, size_t>& Limits() {
  static std::map<const void*, size_t> limits;
  return limits;
}

}  // namespace

size_t DynamicSharedLimit(const void* kernel_id) {
  const std::lock_guard<std::mutex> lock(g_limits_mutex);
  const auto it = Limits().find(kernel_id);
  return it == Limits().end() ? kDefaultDynamicShared : it->second;
}

void SetDynamicSharedLimit(const void* kernel_id, size_t bytes) {
  const std::lock_guard<std::mutex> lock(g_limits_mutex);
  Limits()[kernel_id] = bytes;
}

std::string Run(dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                const std::function<void()>& kernel, Order order,
                unsigned cluster, const void* kernel_id) {
  if (g_launch != nullptr) return "Run called inside a Run";
  g_last_error = CheckConfiguration(grid, block, dynamic_shared_bytes, cluster);
  if (g_last_error.empty() && kernel_id != nullptr) {
    const size_t limit = DynamicSharedLimit(kernel_id);
    if (dynamic_shared_bytes > limit) {
      g_last_error = "dynamic shared memory " +
                     std::to_string(dynamic_shared_bytes) +
                     " bytes past the kernel's limit " + std::to_string(limit) +
                     " (cudaFuncAttributeMaxDynamicSharedMemorySize)";
    }
  }
  if (!g_last_error.empty()) return g_last_error;
  const size_t threads = size_t{block.x} * block.y * block.z;
  Launch l;
  l.grid = grid;
  l.block = block;
  l.shared_bytes = dynamic_shared_bytes;
  l.kernel = &kernel;
  l.blocks.resize(cluster);
  l.fibers.resize(cluster * threads);
  const size_t stride =
      (dynamic_shared_bytes + kSharedAlign - 1) / kSharedAlign * kSharedAlign;
  std::unique_ptr<unsigned char, decltype(&std::free)> shared(
      stride > 0 ? static_cast<unsigned char*>(
                       std::aligned_alloc(kSharedAlign, cluster * stride))
                 : nullptr,
      &std::free);
  for (unsigned b = 0; b < cluster; ++b) {
    l.blocks[b].shared = stride > 0 ? shared.get() + b * stride : nullptr;
  }
  const Stacks stacks(static_cast<int>(l.fibers.size()));
  getcontext(&l.start);
  g_launch = &l;
  bool ok = true;
  for (unsigned z = 0; ok && z < grid.z; ++z) {
    for (unsigned y = 0; ok && y < grid.y; ++y) {
      for (unsigned x = 0; ok && x < grid.x; x += cluster) {
        for (unsigned b = 0; b < cluster; ++b) {
          l.blocks[b].index = {x + b, y, z};
        }
        ok = RunCluster(l, stacks, order);
      }
    }
  }
  g_launch = nullptr;
  g_last_error = l.error;
  return l.error;
}

const std::string& LastRunError() { return g_last_error; }

const uint3& ThreadIndex() { return Current().current->index; }
const uint3& BlockIndex() {
  Launch& l = Current();
  return BlockOf(l, *l.current).index;
}
const dim3& BlockDim() { return Current().block; }
const dim3& GridDim() { return Current().grid; }
int LaneId() { return Current().current->linear % 32; }

void* DynamicShared(size_t align) {
  Launch& l = Current();
  if (align > kSharedAlign) Fail(l, "dynamic shared memory aligned past 256");
  return BlockOf(l, *l.current).shared;  // null without any: a use faults
}

// Block's instance of the static shared array `tag`, made (0xff) at first
// use.
unsigned char* StaticOf(Block& block, const void* tag, size_t bytes) {
  for (auto& [t, buffer] : block.statics) {
    if (t == tag) return buffer.data();
  }
  block.statics.emplace_back(tag, std::vector<unsigned char>(bytes, 0xff));
  return block.statics.back().second.data();
}

void* BlockStatic(const void* tag, size_t bytes) {
  Launch& l = Current();
  return StaticOf(BlockOf(l, *l.current), tag, bytes);
}

int ClusterRank() {
  Launch& l = Current();
  return l.current->block;
}
int ClusterSize() { return static_cast<int>(Current().blocks.size()); }

// The running fiber waits at a barrier of `kind`, counted in *waiting,
// until ReleaseBarriers lets its threads go.
void WaitAtBarrier(Launch& l, const char* what, Wait kind, int* waiting) {
  Fiber& f = *l.current;
  FailIfTheWarpWaits(l, f, what);
  f.wait = kind;
  ++*waiting;
  ReleaseBarriers(l, f.block);
  while (f.wait == kind) Yield(l);
}

void ClusterSync() {
  Launch& l = Current();
  WaitAtBarrier(l, "cluster.sync", Wait::kCluster, &l.cluster_waiting);
}

void* MapSharedRank(const void* address, int rank) {
  Launch& l = Current();
  if (rank < 0 || rank >= static_cast<int>(l.blocks.size())) {
    Fail(l, "map_shared_rank: no such block in the cluster");
  }
  if (l.blocks[rank].live == 0) {
    Fail(l,
         "map_shared_rank: the block has returned (its shared memory is "
         "gone)");
  }
  const Block& mine = BlockOf(l, *l.current);
  const auto* p = static_cast<const unsigned char*>(address);
  if (mine.shared != nullptr && p >= mine.shared &&
      p < mine.shared + l.shared_bytes) {
    return l.blocks[rank].shared + (p - mine.shared);
  }
  for (const auto& [tag, buffer] : mine.statics) {
    if (p >= buffer.data() && p < buffer.data() + buffer.size()) {
      return StaticOf(l.blocks[rank], tag, buffer.size()) + (p - buffer.data());
    }
  }
  Fail(l, "map_shared_rank: not an address in the block's shared memory");
}

void SyncThreads() {
  Launch& l = Current();
  WaitAtBarrier(l, "__syncthreads", Wait::kBlock,
                &BlockOf(l, *l.current).waiting);
}

void WarpCollective(const char* what, unsigned mask, Combine combine,
                    const void* in, size_t in_bytes, int arg, void* out,
                    size_t out_bytes) {
  Launch& l = Current();
  Fiber& f = *l.current;
  const int lane = f.linear % 32;
  Warp& w = WarpOf(l, f);
  if (in_bytes > sizeof(Lane::in) || out_bytes > sizeof(Lane::out)) {
    Fail(l, what, ": operand too large for the emulator");
  }
  if (!(mask >> lane & 1u)) Fail(l, what, ": the calling lane is not in mask");
  size_t g = 0;
  while (g < w.groups.size() && w.groups[g].mask != mask) {
    if (w.groups[g].mask & mask) {
      Fail(l, "lanes of a warp at collectives of overlapping masks: ", what);
    }
    ++g;
  }
  if (g == w.groups.size()) {
    w.groups.push_back({mask, 0, what, combine});
  } else if (std::strcmp(w.groups[g].what, what) != 0) {
    Fail(l, "lanes of a warp at different collectives: ", what, " and another");
  }
  if (in_bytes > 0) std::memcpy(w.lanes[lane].in, in, in_bytes);
  w.lanes[lane].arg = arg;
  w.groups[g].arrived |= 1u << lane;
  f.wait = Wait::kWarp;
  ReleaseIfComplete(l, w, g);
  while (f.wait == Wait::kWarp) Yield(l);
  if (out_bytes > 0) std::memcpy(out, w.lanes[lane].out, out_bytes);
}

void AsyncCopy(void* shared_dst, const void* global_src, size_t bytes) {
  Launch& l = Current();
  if (bytes != 4 && bytes != 8 && bytes != 16) {
    Fail(l, "cp.async: a copy of other than 4, 8 or 16 bytes");
  }
  if ((reinterpret_cast<uintptr_t>(shared_dst) |
       reinterpret_cast<uintptr_t>(global_src)) %
          bytes !=
      0) {
    Fail(l, "cp.async: an address not aligned to the copy's size");
  }
  l.current->copies.push_back({shared_dst, global_src, bytes});
}

void AsyncCommit() {
  Fiber& f = *Current().current;
  f.copy_groups.push_back(std::move(f.copies));
  f.copies.clear();
}

void AsyncWait(int pending) {
  Fiber& f = *Current().current;
  while (static_cast<int>(f.copy_groups.size()) > std::max(pending, 0)) {
    for (const Fiber::Copy& c : f.copy_groups.front()) {
      std::memcpy(c.dst, c.src, c.bytes);
    }
    f.copy_groups.pop_front();
  }
}

void Trap(const char* what, const char* detail) {
  Fail(Current(), what, detail);
}

}  // namespace h3::emulator
