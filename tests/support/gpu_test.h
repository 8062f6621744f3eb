#ifndef H3_TESTS_SUPPORT_GPU_TEST_H_
#define H3_TESTS_SUPPORT_GPU_TEST_H_

#include <string>

#include "gtest/gtest.h"

namespace h3::testing {

// True when the CUDA runtime sees at least one usable device; otherwise false
// with the runtime's reason (no device, no driver, ...) in *why.
bool HasCudaDevice(std::string* why);

// Base fixture for tests that need a GPU (register them with LABELS gpu).
// On a machine without one, every test skips with the reason, which ctest
// reports as "Skipped" rather than "Passed".
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!HasCudaDevice(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }
};

// The same for parameterised GPU tests.
template <typename T>
class GpuTestWithParam : public ::testing::TestWithParam<T> {
 protected:
  void SetUp() override {
    std::string why;
    if (!HasCudaDevice(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }
};

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_GPU_TEST_H_
