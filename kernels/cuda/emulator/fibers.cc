// Fibers switch by _setjmp/_longjmp between stacks (no signal-mask system
// call per switch, as swapcontext makes); glibc's fortified longjmp would
// refuse a jump to another stack.
#undef _FORTIFY_SOURCE
#include "kernels/cuda/emulator/fibers.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

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

struct Warp {
  unsigned arrived = 0;  // lanes waiting at the current collective
  unsigned mask = 0;
  const char* what = nullptr;
  Combine combine = nullptr;
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
      mprotect(base_ + i * (kStackBytes + kGuardBytes), kGuardBytes,
               PROT_NONE);
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
  void* fake_stack = nullptr;       // the scheduler's
  const void* main_bottom = nullptr;  // the scheduler's stack
  size_t main_size = 0;
#endif
};

thread_local Launch* g_launch = nullptr;
thread_local std::string g_last_error;

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
    }
    _longjmp(f.jump, 1);
  }
#if defined(H3_EMULATOR_ASAN)
  __sanitizer_finish_switch_fiber(l.fake_stack, nullptr, nullptr);
#endif
}

[[noreturn]] void Fail(Launch& l, const std::string& what) {
  if (l.error.empty()) l.error = what + Where(l, *l.current);
  l.current->wait = Wait::kDone;  // never run again
  for (;;) Yield(l);
}

void ReleaseBlockBarrier(Launch& l) {
  if (l.block_waiting == 0 || l.block_waiting < l.live) return;
  for (Fiber& f : l.fibers) {
    if (f.wait == Wait::kBlock) f.wait = Wait::kNone;
  }
  l.block_waiting = 0;
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
  const Warp& w = l.warps[f.linear / 32];
  if (w.arrived != 0 && (w.mask >> (f.linear % 32) & 1u)) {
    l.error = std::string("a lane returned while its warp waits for it at ") +
              w.what + Where(l, f);
  }
  ReleaseBlockBarrier(l);
  for (;;) Yield(l);
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
    const Warp& w = l.warps[i];
    if (w.arrived == 0) continue;
    char line[160];
    std::snprintf(line, sizeof line,
                  " warp %zu at %s with lanes 0x%08x of mask 0x%08x;", i,
                  w.what, w.arrived, w.mask);
    text += line;
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
  for (Warp& w : l.warps) w.arrived = 0;
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

}  // namespace

std::string Run(dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                const std::function<void()>& kernel, Order order) {
  const size_t threads = size_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 ||
      grid.z == 0) {
    return "invalid launch configuration";
  }
  if (g_launch != nullptr) return "Run called inside a Run";
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

void* DynamicShared(size_t align) {
  Launch& l = Current();
  if (align > kSharedAlign) Fail(l, "dynamic shared memory aligned past 256");
  if (l.shared == nullptr) Fail(l, "dynamic shared memory of a launch of 0");
  return l.shared;
}

void SyncThreads() {
  Launch& l = Current();
  Fiber& f = *l.current;
  const Warp& w = l.warps[f.linear / 32];
  if (w.arrived != 0 && (w.mask >> (f.linear % 32) & 1u)) {
    Fail(l, std::string("__syncthreads while the warp waits at ") + w.what);
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
    Fail(l, std::string(what) + ": operand too large for the emulator");
  }
  if (!(mask >> lane & 1u)) {
    Fail(l, std::string(what) + ": the calling lane is not in the mask");
  }
  if (w.arrived == 0) {
    w.mask = mask;
    w.what = what;
    w.combine = combine;
  } else if (w.mask != mask || std::strcmp(w.what, what) != 0) {
    Fail(l, std::string("lanes of a warp at different collectives: ") + what +
                " and " + w.what);
  }
  for (int i = 0; i < 32; ++i) {
    if (!(mask >> i & 1u)) continue;
    const int t = first + i;
    if (t >= static_cast<int>(l.fibers.size()) ||
        l.fibers[t].wait == Wait::kDone) {
      Fail(l, std::string(what) + ": a lane in the mask has returned or " +
                  "does not exist");
    }
  }
  std::memcpy(w.lanes[lane].in, in, in_bytes);
  w.lanes[lane].arg = arg;
  w.arrived |= 1u << lane;
  f.wait = Wait::kWarp;
  if (w.arrived == mask) {
    if (const char* wrong = w.combine(w.lanes, mask)) {
      Fail(l, std::string(what) + ": " + wrong);
    }
    for (int i = 0; i < 32; ++i) {
      if (mask >> i & 1u) l.fibers[first + i].wait = Wait::kNone;
    }
    w.arrived = 0;
  }
  while (f.wait == Wait::kWarp) Yield(l);
  std::memcpy(out, w.lanes[lane].out, out_bytes);
}

void Trap(const std::string& what) { Fail(Current(), what); }

}  // namespace h3::emulator
