// SkinnyGemmCuda against its CPU emulation, bitwise (label gpu: skipped
// without a device), and its refusals.
#include "kernels/cuda/skinny_gemm.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "tests/support/gpu_test.h"
#include "tests/support/skinny_gemm_data.h"

namespace h3::kernels {
namespace {

using h3::testing::MakeSkinnyGemmData;
using h3::testing::SkinnyGemmData;

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess)

struct Case {
  ElementType type;
  int64_t rows, n, k;
  bool bias, gelu;
  int64_t w_offset;  // elements: a W that starts unaligned takes scalar loads
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(ElementTypeName(c.type)) + "_" + std::to_string(c.rows) +
         "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         (c.bias ? "_bias" : "") + (c.gelu ? "_gelu" : "") +
         (c.w_offset != 0 ? "_unaligned" : "");
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << ElementTypeName(c.type) << " rows " << c.rows << " n " << c.n << " k "
      << c.k << (c.bias ? " bias" : "") << (c.gelu ? " gelu" : "")
      << (c.w_offset != 0 ? " unaligned W" : "");
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// The device's y for d's x rows [first, first + rows) (or `x` if given).
void RunOnDevice(const SkinnyGemmData& d, const std::vector<float>& x,
                 int64_t rows, bool bias, bool gelu, int64_t w_offset,
                 std::vector<float>* y) {
  const size_t w_bytes = d.w_bits.size();
  const size_t offset_bytes = w_offset * ElementSize(d.type);
  DeviceBuffer dx, dw, db, dy;
  ASSERT_CUDA_OK(dx.Reserve(x.size() * sizeof(float)));
  ASSERT_CUDA_OK(dw.Reserve(w_bytes + offset_bytes));
  ASSERT_CUDA_OK(db.Reserve(d.bias.size() * sizeof(float)));
  ASSERT_CUDA_OK(dy.Reserve(rows * d.n * sizeof(float)));
  auto* w = static_cast<uint8_t*>(dw.get()) + offset_bytes;
  ASSERT_CUDA_OK(cudaMemcpy(dx.get(), x.data(), x.size() * sizeof(float),
                            cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(
      cudaMemcpy(w, d.w_bits.data(), w_bytes, cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(cudaMemcpy(db.get(), d.bias.data(),
                            d.bias.size() * sizeof(float),
                            cudaMemcpyHostToDevice));
  const SkinnyGemmParams p{static_cast<const float*>(dx.get()),
                           w,
                           d.type,
                           bias ? static_cast<const float*>(db.get()) : nullptr,
                           static_cast<float*>(dy.get()),
                           rows,
                           d.n,
                           d.k,
                           gelu};
  ASSERT_CUDA_OK(SkinnyGemmCuda(p, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  y->assign(rows * d.n, NAN);
  ASSERT_CUDA_OK(cudaMemcpy(y->data(), dy.get(), y->size() * sizeof(float),
                            cudaMemcpyDeviceToHost));
}

class SkinnyGemmGpuTest : public h3::testing::GpuTestWithParam<Case> {};

TEST_P(SkinnyGemmGpuTest, EqualsEmulationBitwise) {
  const Case c = GetParam();
  const SkinnyGemmData d = MakeSkinnyGemmData(c.type, c.rows, c.n, c.k, 5);
  std::vector<float> want(c.rows * c.n, NAN), got;
  SkinnyGemmEmulation({d.x.data(), d.w_bits.data(), c.type,
                       c.bias ? d.bias.data() : nullptr, want.data(), c.rows,
                       c.n, c.k, c.gelu});
  RunOnDevice(d, d.x, c.rows, c.bias, c.gelu, c.w_offset, &got);
  for (int64_t i = 0; i < c.rows * c.n; ++i) {
    ASSERT_EQ(Bits(got[i]), Bits(want[i]))
        << "row " << i / c.n << " col " << i % c.n << ": got " << got[i]
        << " want " << want[i];
  }
}

// The device's row alone equals the same row at positions of a batch of 64.
TEST_P(SkinnyGemmGpuTest, RowAloneEqualsRowInBatch) {
  const Case c = GetParam();
  const SkinnyGemmData d = MakeSkinnyGemmData(c.type, 64, c.n, c.k, 9);
  const std::vector<float> row(d.x.begin() + 3 * c.k, d.x.begin() + 4 * c.k);
  std::vector<float> alone, batch;
  RunOnDevice(d, row, 1, c.bias, c.gelu, c.w_offset, &alone);
  for (const int64_t size : {7, 64}) {
    for (const int64_t at : {int64_t{0}, size / 2, size - 1}) {
      std::vector<float> x(d.x.begin(), d.x.begin() + size * c.k);
      std::copy(row.begin(), row.end(), x.begin() + at * c.k);
      RunOnDevice(d, x, size, c.bias, c.gelu, c.w_offset, &batch);
      for (int64_t j = 0; j < c.n; ++j) {
        ASSERT_EQ(Bits(batch[at * c.n + j]), Bits(alone[j]))
            << "at " << at << " of " << size << ", col " << j;
      }
    }
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    for (int64_t rows : {1, 7, 64}) {
      cases.push_back({type, rows, 37, 1000, false, false, 0});
      cases.push_back({type, rows, 37, 1000, true, false, 0});
      cases.push_back({type, rows, 37, 1000, true, true, 0});
    }
    // Odd k (scalar W and x loads), an unaligned W, every row-group size
    // (rows 3, 8, 9, 16, 33), a d_model-sized product and the largest k.
    cases.push_back({type, 9, 5, 301, true, true, 0});
    cases.push_back({type, 16, 9, 777, true, true, 0});
    cases.push_back({type, 33, 9, 256, true, false, 0});
    cases.push_back({type, 3, 6, 512, true, false, 1});
    cases.push_back({type, 8, 2048, 2048, true, true, 0});
    cases.push_back({type, 2, 7, 12288, false, false, 0});
  }
  cases.push_back({ElementType::kF32, 7, 37, 1000, true, true, 0});
  cases.push_back({ElementType::kF32, 64, 11, 6144, true, false, 0});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, SkinnyGemmGpuTest, ::testing::ValuesIn(Cases()),
                         CaseName);

using SkinnyGemmRefusalTest = h3::testing::GpuTest;

TEST_F(SkinnyGemmRefusalTest, InvalidValueOutsideTheContract) {
  DeviceBuffer buffer;
  ASSERT_CUDA_OK(buffer.Reserve(1 << 20));
  auto* f = static_cast<float*>(buffer.get());
  SkinnyGemmParams p{f,  f + 1024, ElementType::kF16, nullptr, f + 4096, 65, 4,
                     64, false};
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaErrorInvalidValue);  // rows
  p.rows = 1;
  p.k = 12289;
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaErrorInvalidValue);  // k
  p.k = 64;
  p.w_type = ElementType::kI8;
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaErrorInvalidValue);  // type
  p.w_type = ElementType::kF16;
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaSuccess);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace h3::kernels
