// LD_PRELOAD shim for ThreadSanitizer runs against Debian's abseil, which is
// not built with TSan: absl::Mutex and absl::CondVar synchronise through
// futexes that TSan does not see, so every access they guard looks like a
// race. This library interposes their lock, unlock and wait entry points,
// forwards each to abseil (dlsym RTLD_NEXT) and tells TSan what it did
// (__tsan_acquire after taking a mutex and before evaluating a Condition
// of Await, __tsan_release before giving it up). Built and preloaded by
// scripts/sanitize.sh tsan; not instrumented itself, and a no-op without the
// TSan runtime.
#include <dlfcn.h>

#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace {

using Annotation = void (*)(void*);

Annotation Tsan(const char* name) {
  static Annotation none = [](void*) {};
  void* f = dlsym(RTLD_DEFAULT, name);
  return f != nullptr ? reinterpret_cast<Annotation>(f) : none;
}

void Acquire(const void* mu) {
  static const Annotation f = Tsan("__tsan_acquire");
  f(const_cast<void*>(mu));
}

void Release(const void* mu) {
  static const Annotation f = Tsan("__tsan_release");
  f(const_cast<void*>(mu));
}

// abseil's own definition of the function with mangled name `symbol`.
template <typename F>
F Next(const char* symbol) {
  void* f = dlsym(RTLD_NEXT, symbol);
  if (f == nullptr) std::abort();
  return reinterpret_cast<F>(f);
}

using MutexFn = void (*)(absl::Mutex*);
using TryFn = bool (*)(absl::Mutex*);
using AwaitFn = void (*)(absl::Mutex*, const absl::Condition&);
using WaitFn = void (*)(absl::CondVar*, absl::Mutex*);
using DeadlineFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Time);
using TimeoutFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Duration);

// A condition that abseil may evaluate in any thread holding `mu` (the
// waiter after a wake-up, or a thread unlocking): for TSan it acquires `mu`
// before and releases it after, so that what it reads is ordered after the
// last holder's writes and before the next holder's.
struct Guarded {
  const absl::Mutex* mu;
  const absl::Condition* cond;
};

bool EvalAcquiring(Guarded* g) {
  Acquire(g->mu);
  const bool holds = g->cond->Eval();
  Release(g->mu);  // abseil may give `mu` up next without telling TSan
  return holds;
}

}  // namespace

void absl::Mutex::Lock() {
  static const auto next = Next<MutexFn>("_ZN4absl7debian35Mutex4LockEv");
  next(this);
  Acquire(this);
}

void absl::Mutex::Unlock() {
  static const auto next = Next<MutexFn>("_ZN4absl7debian35Mutex6UnlockEv");
  Release(this);
  next(this);
}

bool absl::Mutex::TryLock() {
  static const auto next = Next<TryFn>("_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = next(this);
  if (locked) Acquire(this);
  return locked;
}

void absl::Mutex::ReaderLock() {
  static const auto next =
      Next<MutexFn>("_ZN4absl7debian35Mutex10ReaderLockEv");
  next(this);
  Acquire(this);
}

void absl::Mutex::ReaderUnlock() {
  static const auto next =
      Next<MutexFn>("_ZN4absl7debian35Mutex12ReaderUnlockEv");
  Release(this);
  next(this);
}

void absl::Mutex::Await(const absl::Condition& cond) {
  static const auto next =
      Next<AwaitFn>("_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  Guarded guarded{this, &cond};
  const absl::Condition acquiring(&EvalAcquiring, &guarded);
  Release(this);
  next(this, acquiring);
  Acquire(this);
}

void absl::CondVar::Wait(absl::Mutex* mu) {
  static const auto next =
      Next<WaitFn>("_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  Release(mu);
  next(this, mu);
  Acquire(mu);
}

bool absl::CondVar::WaitWithDeadline(absl::Mutex* mu, absl::Time deadline) {
  static const auto next = Next<DeadlineFn>(
      "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Release(mu);
  const bool timed_out = next(this, mu, deadline);
  Acquire(mu);
  return timed_out;
}

bool absl::CondVar::WaitWithTimeout(absl::Mutex* mu, absl::Duration timeout) {
  static const auto next = Next<TimeoutFn>(
      "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Release(mu);
  const bool timed_out = next(this, mu, timeout);
  Acquire(mu);
  return timed_out;
}
