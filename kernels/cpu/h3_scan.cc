// H3 prefill by the recurrence: the step's routine
// (kernels/cpu/h3_recurrence.h) over a chunk, each head's tokens in order.
#include <algorithm>

#include "base/parallel.h"
#include "kernels/cpu/h3_recurrence.h"
#include "kernels/h3.h"

namespace h3::kernels {

void H3ScanCpu(const H3ScanParams& p, const H3RecurrentWeightsCpu& w) {
  if (p.length <= 0) return;
  const H3Shape& shape = w.shape();
  const int heads = shape.heads(), pd = shape.head_dim;
  H3RecurrenceRun run;
  run.start = p.start;
  run.length = p.length;
  run.q = p.q;
  run.k = p.k;
  run.v = p.v;
  run.input_stride = p.input_stride > 0 ? p.input_stride : shape.d_model;
  run.out = p.out;
  run.state = p.state;
  // Heads are independent; a head's tokens are a chain. As for the step, a
  // few hundred head-tokens per task at least.
  const int64_t per_head = p.length * pd * pd;
  const int64_t grain = std::max<int64_t>(1, 256 / per_head);
  ParallelFor(heads, grain, [&](int64_t begin, int64_t end) {
    H3RecurHeads(w, run, static_cast<int>(begin), static_cast<int>(end));
  });
}

void H3ScanCpu(const H3ScanParams& p) {
  if (p.length <= 0) return;
  H3ScanCpu(p, H3RecurrentWeightsCpu(p.w));
}

}  // namespace h3::kernels
