// Fibers switch by _setjmp/_longjmp between stacks (no signal-mask system
// call per switch, as swapcontext makes); glibc's fortified longjmp would
// refuse a jump to another stack.
#undef _FORTIFY_SOURCE
#include "kernels/cuda/emulator/fibers.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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
constexpr size_t kMaxDynamicShared = 232448;

enum class Wait { kNone, kBlock, kWarp, kDone };

struct Fiber {
  ucontext_t context;  // its start (makecontext)
  jmp_buf jump;        // where it waits
  bool started = false;
  unsigned char* stack = nullptr;  // kStackBytes
  uint3 index{};
  int linear = 0;  // threadIdx as a linear index
  Wait wait = Wait::kNone;
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
  unsigned present = 0;  // lanes that exist (a block's last warp may be short)
  unsigned exited = 0;   // lanes that have returned
  std::vector<Group> groups;
  Lane lanes[32];
};

// Stacks for a block's fibers, each above a guard page.
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

struct Launch {
  dim3 grid, block;
  uint3 block_index{};
  const std::function<void()>* kernel = nullptr;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  unsigned char* shared = nullptr;
  jmp_buf scheduler;
  Fiber* current = nullptr;
  int live = 0;           // threads of the block that have not returned
  int block_waiting = 0;  // ... waiting at __syncthreads
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

std::string Where(const Launch& l, const Fiber& f) {
  char text[96];
  std::snprintf(text, sizeof text, " (block %u,%u,%u thread %u,%u,%u)",
                l.block_index.x, l.block_index.y, l.block_index.z, f.index.x,
                f.index.y, f.index.z);
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

void ReleaseBlockBarrier(Launch& l) {
  if (l.block_waiting == 0 || l.block_waiting < l.live) return;
  for (Fiber& f : l.fibers) {
    if (f.wait == Wait::kBlock) f.wait = Wait::kNone;
  }
  l.block_waiting = 0;
}

// Runs group g's combine and releases its lanes once every lane of its
// mask that exists and has not returned has arrived; the lanes that did
// take part are the combine's mask.
void ReleaseIfComplete(Launch& l, Warp& w, size_t g, int first) {
  const Group group = w.groups[g];
  const unsigned needed = group.mask & w.present & ~w.exited;
  if ((group.arrived & needed) != needed) return;
  if (const char* wrong = group.combine(w.lanes, group.arrived)) {
    Fail(l, group.what, ": ", wrong);
  }
  w.groups.erase(w.groups.begin() + static_cast<std::ptrdiff_t>(g));
  for (int i = 0; i < 32; ++i) {
    if (group.arrived >> i & 1u) l.fibers[first + i].wait = Wait::kNone;
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
  // Collectives need only the lanes that have not returned (CUDA's
  // "non-exited threads named in mask"): this one may complete some.
  const int lane = f.linear % 32, first = f.linear - lane;
  Warp& w = l.warps[f.linear / 32];
  w.exited |= 1u << lane;
  for (size_t g = w.groups.size(); g-- > 0;) {
    if (w.groups[g].mask >> lane & 1u) ReleaseIfComplete(l, w, g, first);
  }
  ReleaseBlockBarrier(l);
  Leave(l);
}

std::string Deadlock(const Launch& l) {
  std::string text = "deadlock:";
  int at_block = 0;
  for (const Fiber& f : l.fibers) at_block += f.wait == Wait::kBlock;
  if (at_block > 0) {
    text += " " + std::to_string(at_block) + " of " +
            std::to_string(l.live) + " live threads at __syncthreads;";
  }
  for (size_t i = 0; i < l.warps.size(); ++i) {
    for (const Group& g : l.warps[i].groups) {
      char line[160];
      std::snprintf(line, sizeof line,
                    " warp %zu at %s with lanes 0x%08x of mask 0x%08x;", i,
                    g.what, g.arrived, g.mask);
      text += line;
    }
  }
  char where[64];
  std::snprintf(where, sizeof where, " (block %u,%u,%u)", l.block_index.x,
                l.block_index.y, l.block_index.z);
  return text + where;
}

// Runs the block l.block_index; false when it failed (l.error).
bool RunBlock(Launch& l, const Stacks& stacks, size_t shared_bytes,
              Order order) {
  const int n = static_cast<int>(l.fibers.size());
  if (shared_bytes > 0) std::memset(l.shared, 0xff, shared_bytes);
  for (size_t i = 0; i < l.warps.size(); ++i) {
    Warp& w = l.warps[i];
    const int lanes = std::min(32, n - static_cast<int>(32 * i));
    w.present = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
    w.exited = 0;
    w.groups.clear();
  }
  for (int i = 0; i < n; ++i) {
    Fiber& f = l.fibers[i];
    f.index = {i % l.block.x, i / l.block.x % l.block.y,
               i / (l.block.x * l.block.y)};
    f.linear = i;
    f.wait = Wait::kNone;
    f.started = false;
    f.stack = stacks.stack(i);
    f.context = l.start;
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, &FiberMain, 0);
  }
  l.live = n;
  l.block_waiting = 0;
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
std::string CheckConfiguration(dim3 grid, dim3 block, size_t shared_bytes) {
  const size_t threads = size_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > kMaxBlockXY ||
      block.y > kMaxBlockXY || block.z > kMaxBlockZ) {
    return "invalid launch configuration: block of " +
           std::to_string(block.x) + " x " + std::to_string(block.y) + " x " +
           std::to_string(block.z) +
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
  return "";
}

}  // namespace

Order DefaultOrder() { return g_default_order; }

ScopedOrder::ScopedOrder(Order order) : previous_(g_default_order) {
  g_default_order = order;
}
ScopedOrder::~ScopedOrder() { g_default_order = previous_; }

std::string Run(dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                const std::function<void()>& kernel, Order order) {
  if (g_launch != nullptr) return "Run called inside a Run";
  g_last_error = CheckConfiguration(grid, block, dynamic_shared_bytes);
  if (!g_last_error.empty()) return g_last_error;
  const size_t threads = size_t{block.x} * block.y * block.z;
  Launch l;
  l.grid = grid;
  l.block = block;
  l.kernel = &kernel;
  l.fibers.resize(threads);
  l.warps.resize((threads + 31) / 32);
  const size_t shared_alloc =
      (dynamic_shared_bytes + kSharedAlign - 1) / kSharedAlign * kSharedAlign;
  std::unique_ptr<unsigned char, decltype(&std::free)> shared(
      shared_alloc > 0 ? static_cast<unsigned char*>(
                             std::aligned_alloc(kSharedAlign, shared_alloc))
                       : nullptr,
      &std::free);
  l.shared = shared.get();
  const Stacks stacks(static_cast<int>(threads));
  getcontext(&l.start);
  g_launch = &l;
  bool ok = true;
  for (unsigned z = 0; ok && z < grid.z; ++z) {
    for (unsigned y = 0; ok && y < grid.y; ++y) {
      for (unsigned x = 0; ok && x < grid.x; ++x) {
        l.block_index = {x, y, z};
        ok = RunBlock(l, stacks, dynamic_shared_bytes, order);
      }
    }
  }
  g_launch = nullptr;
  g_last_error = l.error;
  return l.error;
}

const std::string& LastRunError() { return g_last_error; }

const uint3& ThreadIndex() { return Current().current->index; }
const uint3& BlockIndex() { return Current().block_index; }
const dim3& BlockDim() { return Current().block; }
const dim3& GridDim() { return Current().grid; }
int LaneId() { return Current().current->linear % 32; }

unsigned LiveLanes() {
  Launch& l = Current();
  const Warp& w = l.warps[l.current->linear / 32];
  return w.present & ~w.exited;
}

void* DynamicShared(size_t align) {
  Launch& l = Current();
  if (align > kSharedAlign) Fail(l, "dynamic shared memory aligned past 256");
  return l.shared;  // null for a launch without any: a use faults
}

void SyncThreads() {
  Launch& l = Current();
  Fiber& f = *l.current;
  const Warp& w = l.warps[f.linear / 32];
  for (const Group& g : w.groups) {
    if (g.mask >> (f.linear % 32) & 1u) {
      Fail(l, "__syncthreads while the warp waits for this lane at ", g.what);
    }
  }
  f.wait = Wait::kBlock;
  ++l.block_waiting;
  ReleaseBlockBarrier(l);
  while (f.wait == Wait::kBlock) Yield(l);
}

void WarpCollective(const char* what, unsigned mask, Combine combine,
                    const void* in, size_t in_bytes, int arg, void* out,
                    size_t out_bytes) {
  Launch& l = Current();
  Fiber& f = *l.current;
  const int lane = f.linear % 32, first = f.linear - lane;
  Warp& w = l.warps[f.linear / 32];
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
  ReleaseIfComplete(l, w, g, first);
  while (f.wait == Wait::kWarp) Yield(l);
  if (out_bytes > 0) std::memcpy(out, w.lanes[lane].out, out_bytes);
}

void Trap(const char* what, const char* detail) {
  Fail(Current(), what, detail);
}

}  // namespace h3::emulator
