#ifndef H3_KERNELS_CUDA_LAUNCH_TIMING_H_
#define H3_KERNELS_CUDA_LAUNCH_TIMING_H_

// Timing a launch at run time, to choose among kernels or algorithms for one
// product on the device at hand (LinearCuda's tuned cuBLASLt algorithms, the
// CUDA backend's measured decode products): each call finds its weights in
// HBM, as a decode step does, because the L2 cache is overwritten before it.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

#include "kernels/cuda/device_buffer.h"

namespace h3::kernels {

// Timed calls of a launch, after one untimed.
constexpr int kLaunchTimingReps = 5;

// A buffer of twice the current device's L2 bytes, where the device has
// four times that free; else empty (then calls are timed without a flush).
// Errors are cleared, not returned: timing goes on without a flush.
DeviceBuffer L2FlushBuffer();

// Times `launch` (which enqueues one call on `stream` and returns whether it
// did: false, a refusal, ends the timing with *median_ms = -1): one untimed
// call, then kLaunchTimingReps timed ones between CUDA events, each after
// `flush` (when not empty) is overwritten on the stream. *median_ms: the
// median of the timed calls. Synchronises the stream. "" or the failed
// runtime call, named. Not while `stream` is capturing (the caller checks).
std::string MedianLaunchMs(cudaStream_t stream, const DeviceBuffer& flush,
                           const std::function<bool()>& launch,
                           float* median_ms);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_LAUNCH_TIMING_H_
