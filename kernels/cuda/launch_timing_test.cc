// MedianLaunchMs and L2FlushBuffer (label gpu: skipped without a device):
// a launch is timed after one untimed call, the flush holds twice the L2
// (or nothing), and a refusal ends the timing without a time, the stream
// left usable.
#include "kernels/cuda/launch_timing.h"

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "tests/support/gpu_test.h"

namespace h3::kernels {
namespace {

using LaunchTimingTest = h3::testing::GpuTest;

TEST_F(LaunchTimingTest, TimesALaunchAfterFlushingL2) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  int device = 0, l2 = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device),
            cudaSuccess);
  const DeviceBuffer flush = L2FlushBuffer();
  EXPECT_TRUE(flush.bytes() == 0 || flush.bytes() >= size_t(2) * l2);
  DeviceBuffer work;
  ASSERT_EQ(work.Reserve(size_t{64} << 20), cudaSuccess);
  int calls = 0;
  float ms = -1.0f;
  EXPECT_EQ(MedianLaunchMs(
                stream, flush,
                [&] {
                  ++calls;
                  return cudaMemsetAsync(work.get(), calls, work.bytes(),
                                         stream) == cudaSuccess;
                },
                &ms),
            "");
  EXPECT_EQ(calls, kLaunchTimingReps + 1);
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 1000.0f);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(LaunchTimingTest, ARefusalEndsTheTimingWithoutATime) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  int calls = 0;
  float ms = 0.0f;
  EXPECT_EQ(MedianLaunchMs(
                stream, DeviceBuffer(),
                [&] {
                  ++calls;
                  return calls < 3;
                },
                &ms),
            "");
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(ms, -1.0f);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace h3::kernels
