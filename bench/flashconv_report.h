#ifndef H3_BENCH_FLASHCONV_REPORT_H_
#define H3_BENCH_FLASHCONV_REPORT_H_

// What h3_flashconv_bench reports besides its options: the device, the
// memory bandwidth behind the floor, one JSON record per case and path, the
// published reference, and the summary table.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "bench/flashconv_cases.h"
#include "nlohmann/json.hpp"

namespace h3::bench {

// The memory bandwidth the floors divide by.
struct Bandwidth {
  int64_t copy_bytes = 0;  // each copy reads and writes this many bytes
  std::vector<double> copy_ms;
  double measured = 0;  // bytes/s: 2 * copy_bytes / the fastest copy
  int memory_clock_khz = 0, bus_width_bits = 0;  // 0: unavailable
  double peak = 0;                               // bytes/s; 0: unknown
};

// Device-to-device copies of up to `want` bytes (a quarter of the free
// memory at most): 2 untimed, then 20 timed one by one; and the peak from the
// device's attributes.
Bandwidth MeasureBandwidth(int device, int64_t want, cudaStream_t stream);
nlohmann::ordered_json BandwidthJson(const Bandwidth& bw);

// Name, compute capability, SM count, memory, L2, driver and runtime
// versions.
nlohmann::ordered_json DeviceJson(int device);

// The record of path `p` of case `r`, with the floor at `bw`.
nlohmann::ordered_json CaseJson(const CaseResult& r, const PathResult& p,
                                const Bandwidth& bw);

// FlashFFTConv's published numbers, labelled as such.
nlohmann::ordered_json ReferenceJson();

// One row per case on stdout: medians, speedup, floor, diff.
void PrintTable(const std::vector<CaseResult>& cases, const Bandwidth& bw);

}  // namespace h3::bench

#endif  // H3_BENCH_FLASHCONV_REPORT_H_
