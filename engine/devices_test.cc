#include "engine/devices.h"

#include "base/build_info.h"
#include "gtest/gtest.h"

namespace h3::engine {
namespace {

// Runs on every machine: the inventory is well-formed whether or not there is
// a GPU, and an empty one always says why.
TEST(DevicesTest, InventoryIsConsistent) {
  CudaInventory inventory = ListCudaDevices();
  EXPECT_EQ(inventory.built_with_cuda, GetBuildInfo().cuda_enabled);
  if (inventory.devices.empty()) {
    EXPECT_FALSE(inventory.no_device_reason.empty());
  }
  for (size_t i = 0; i < inventory.devices.size(); ++i) {
    const DeviceInfo& d = inventory.devices[i];
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.compute_major, 5);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.total_memory_bytes, 0);
    EXPECT_LE(d.free_memory_bytes, d.total_memory_bytes);
  }
  if (inventory.built_with_cuda) {
    EXPECT_GT(inventory.runtime_version, 0);
  }
}

TEST(DevicesTest, SelfTestRejectsBadIndex) {
  absl::StatusOr<double> result = SelfTestDevice(-1);
  ASSERT_FALSE(result.ok());
  if (GetBuildInfo().cuda_enabled) {
    // With no device, counting them already fails (Internal); with devices,
    // the index is checked (InvalidArgument).
    EXPECT_TRUE(result.status().code() == absl::StatusCode::kInvalidArgument ||
                result.status().code() == absl::StatusCode::kInternal)
        << result.status();
  } else {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace h3::engine
