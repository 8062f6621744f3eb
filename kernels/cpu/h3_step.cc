// One recurrent H3 step per sequence (docs/model.md, "Recurrent form"): the
// one-token run of kernels/cpu/h3_recurrence.h, the routine H3ScanCpu runs
// over a chunk.
#include <algorithm>

#include "base/parallel.h"
#include "kernels/cpu/h3_recurrence.h"
#include "kernels/h3.h"

namespace h3::kernels {

void H3StepCpu(const H3StepParams& p, const H3RecurrentWeightsCpu& w) {
  const H3Shape& shape = w.shape();
  const int heads = shape.heads(), pd = shape.head_dim;
  const int64_t stride = p.input_stride > 0 ? p.input_stride : shape.d_model;
  const int64_t work = static_cast<int64_t>(p.batch) * heads;
  // A head-token costs ~N + p^2 N vector-lane multiply-adds, ~50 ns at p = 1,
  // N = 64: a few hundred per task keep the hand-off to a thread small.
  const int64_t grain = std::max(1, 256 / (pd * pd));
  ParallelFor(work, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t b = i / heads;
      const int head = static_cast<int>(i % heads);
      const int head_end =
          static_cast<int>(std::min<int64_t>(heads, head + (end - i)));
      const int64_t row = b * stride;
      H3RecurrenceRun run;
      run.start = p.positions[b];
      run.length = 1;
      run.q = p.q + row;
      run.k = p.k + row;
      run.v = p.v + row;
      run.input_stride = stride;
      run.out = p.out + b * shape.d_model;
      run.state = p.states[b];
      H3RecurHeads(w, run, head, head_end);
      i += head_end - head;
    }
  });
}

void H3StepCpu(const H3StepParams& p) {
  if (p.batch <= 0) return;
  H3StepCpu(p, H3RecurrentWeightsCpu(p.w));
}

}  // namespace h3::kernels
