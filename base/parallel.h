#ifndef H3_BASE_PARALLEL_H_
#define H3_BASE_PARALLEL_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace h3 {

// Runs fn(begin, end) over [0, n), split into at most NumThreads() contiguous
// ranges of at least `grain` items each, on a process-wide pool of worker
// threads, and returns when all ranges are done. The calling thread runs one
// range itself. A call made from inside a worker runs everything inline, so
// nesting never deadlocks. Thread-safe.
void ParallelFor(int64_t n, int64_t grain,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn);

// Threads ParallelFor uses: $H3_NUM_THREADS if set (>= 1), else the number of
// hardware threads. Fixed at the first call.
int NumThreads();

}  // namespace h3

#endif  // H3_BASE_PARALLEL_H_
