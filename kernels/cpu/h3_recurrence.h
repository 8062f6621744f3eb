#ifndef H3_KERNELS_CPU_H3_RECURRENCE_H_
#define H3_KERNELS_CPU_H3_RECURRENCE_H_

// The one per-token routine behind H3StepCpu and H3ScanCpu (kernels/h3.h).
// Internal to kernels/cpu.

#include <cstdint>

#include "kernels/h3.h"

namespace h3::kernels {

// `length` consecutive tokens of one sequence from position `start`: rows of
// q, k, v `input_stride` elements apart, out rows d_model apart, its state.
struct H3RecurrenceRun {
  int64_t start = 0;
  int64_t length = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t input_stride = 0;  // > 0
  float* out = nullptr;
  H3State state;
};

// Runs the run's tokens, in order, through heads [head_begin, head_end):
// updates those heads' channels of the state and writes their outputs. The
// step is this with length 1; the scan, this with the chunk. Single-threaded;
// calls on disjoint head ranges (or different states) may run concurrently.
void H3RecurHeads(const H3RecurrentWeightsCpu& w, const H3RecurrenceRun& run,
                  int head_begin, int head_end);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CPU_H3_RECURRENCE_H_
