// Label gpu: skipped without a device.
#include "engine/cuda/cuda_devices.h"

#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"

namespace h3::engine::cuda {
namespace {

class CudaDevicesTest : public h3::testing::GpuTest {};

TEST_F(CudaDevicesTest, ListsEveryDeviceWithOurMachineCode) {
  CudaInventory inventory = ListDevices();
  ASSERT_FALSE(inventory.devices.empty()) << inventory.no_device_reason;
  EXPECT_GT(inventory.driver_version, 0);
  for (const DeviceInfo& d : inventory.devices) {
    // We build for sm_80 and sm_90a: the GPUs we target must be covered.
    if (d.compute_major == 8 || d.compute_major == 9) {
      EXPECT_TRUE(d.supported) << d.name;
      // ... each by its own image: sm_80's on 8.x, sm_90a's on 9.x.
      EXPECT_EQ(d.kernel_arch, d.compute_major * 10) << d.name;
    }
  }
}

TEST_F(CudaDevicesTest, SelfTestPassesOnEveryDevice) {
  CudaInventory inventory = ListDevices();
  for (const DeviceInfo& d : inventory.devices) {
    if (!d.supported) continue;
    absl::StatusOr<double> err = SelfTest(d.index);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-5);
  }
}

TEST_F(CudaDevicesTest, SelfTestRejectsIndexPastTheEnd) {
  CudaInventory inventory = ListDevices();
  absl::StatusOr<double> err =
      SelfTest(static_cast<int>(inventory.devices.size()));
  EXPECT_EQ(err.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace h3::engine::cuda
