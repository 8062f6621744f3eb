#include "base/parallel.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace h3 {
namespace {

thread_local bool in_worker = false;

// Workers that run queued closures until the process exits. Never destroyed:
// joining at static destruction would race with other static destructors.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 0; i < threads; ++i) {
      std::thread([this] { Work(); }).detach();
    }
  }

  void Submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void Work() {
    in_worker = true;
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !tasks_.empty(); });
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
};

// Counts finished ranges down to zero. std::mutex rather than
// absl::BlockingCounter: ThreadSanitizer sees through pthreads, not through
// an uninstrumented absl::Mutex.
class Countdown {
 public:
  explicit Countdown(int64_t count) : count_(count) {}
  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ == 0) zero_.notify_one();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    zero_.wait(lock, [this] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable zero_;
  int64_t count_;
};

Pool& GetPool() {
  static Pool* pool = new Pool(NumThreads() - 1);
  return *pool;
}

}  // namespace

int NumThreads() {
  static const int threads = [] {
    if (const char* env = std::getenv("H3_NUM_THREADS")) {
      int n = std::atoi(env);
      if (n >= 1) return n;
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return threads;
}

void ParallelFor(int64_t n, int64_t grain,
                 absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t ranges =
      in_worker ? 1 : std::min<int64_t>(NumThreads(), (n + grain - 1) / grain);
  if (ranges <= 1) {
    fn(0, n);
    return;
  }
  const int64_t per = (n + ranges - 1) / ranges;
  Countdown done(ranges - 1);
  for (int64_t r = 1; r < ranges; ++r) {
    const int64_t begin = r * per, end = std::min(n, begin + per);
    GetPool().Submit([&fn, &done, begin, end] {
      if (begin < end) fn(begin, end);
      done.Done();
    });
  }
  fn(0, std::min(n, per));
  done.Wait();
}

}  // namespace h3
