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

#include "base/half_float.h"
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
  const SkinnyGemmParams p{
      .x = dx.get(),
      .w = w,
      .w_type = d.type,
      .bias = bias ? static_cast<const float*>(db.get()) : nullptr,
      .y = dy.get(),
      .rows = rows,
      .n = d.n,
      .k = d.k,
      .gelu = gelu};
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
  SkinnyGemmEmulation({.x = d.x.data(),
                       .w = d.w_bits.data(),
                       .w_type = c.type,
                       .bias = c.bias ? d.bias.data() : nullptr,
                       .y = want.data(),
                       .rows = c.rows,
                       .n = c.n,
                       .k = c.k,
                       .gelu = c.gelu});
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

// 16-bit x and y (each fp16 or bf16, whatever W is): the kernel against the
// emulation, bitwise. x is N(0, 1) rounded to x_type; x_offset elements
// shift x off 16-byte alignment (scalar x loads).
struct HalfIoCase {
  ElementType w_type, x_type, y_type;
  int64_t rows, n, k, x_offset;
  ElementType bias_type = ElementType::kF32;  // the bias rounded to it
};

std::string HalfIoName(const ::testing::TestParamInfo<HalfIoCase>& info) {
  const HalfIoCase& c = info.param;
  return std::string("w_") + ElementTypeName(c.w_type) + "_x_" +
         ElementTypeName(c.x_type) + "_y_" + ElementTypeName(c.y_type) + "_" +
         std::to_string(c.rows) + "x" + std::to_string(c.n) + "x" +
         std::to_string(c.k) + (c.x_offset != 0 ? "_unaligned" : "") +
         (c.bias_type != ElementType::kF32
              ? std::string("_bias_") + ElementTypeName(c.bias_type)
              : "");
}

void PrintTo(const HalfIoCase& c, std::ostream* os) {
  *os << HalfIoName({c, 0});
}

class SkinnyGemmHalfIoGpuTest
    : public h3::testing::GpuTestWithParam<HalfIoCase> {};

TEST_P(SkinnyGemmHalfIoGpuTest, EqualsEmulationBitwise) {
  const HalfIoCase c = GetParam();
  const SkinnyGemmData d = MakeSkinnyGemmData(c.w_type, c.rows, c.n, c.k, 13);
  const size_t xs = ElementSize(c.x_type), ys = ElementSize(c.y_type);
  std::vector<uint8_t> x((c.x_offset + c.rows * c.k) * xs);
  for (int64_t i = 0; i < c.rows * c.k; ++i) {
    StoreFloat(x.data() + c.x_offset * xs, c.x_type, i, d.x[i]);
  }
  std::vector<uint8_t> bias(c.n * ElementSize(c.bias_type));
  StoreFloats(d.bias.data(), c.n, bias.data(), c.bias_type, 0);
  SkinnyGemmParams p{.x = x.data() + c.x_offset * xs,
                     .x_type = c.x_type,
                     .w = d.w_bits.data(),
                     .w_type = c.w_type,
                     .bias = bias.data(),
                     .bias_type = c.bias_type,
                     .y_type = c.y_type,
                     .rows = c.rows,
                     .n = c.n,
                     .k = c.k,
                     .gelu = true};
  std::vector<uint8_t> want(c.rows * c.n * ys, 0xff);
  p.y = want.data();
  ASSERT_STREQ(SkinnyGemmCheck(p), "");
  SkinnyGemmEmulation(p);

  DeviceBuffer dx, dw, db, dy;
  ASSERT_CUDA_OK(dx.Reserve(x.size()));
  ASSERT_CUDA_OK(dw.Reserve(d.w_bits.size()));
  ASSERT_CUDA_OK(db.Reserve(bias.size()));
  ASSERT_CUDA_OK(dy.Reserve(want.size()));
  ASSERT_CUDA_OK(
      cudaMemcpy(dx.get(), x.data(), x.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(cudaMemcpy(dw.get(), d.w_bits.data(), d.w_bits.size(),
                            cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(
      cudaMemcpy(db.get(), bias.data(), bias.size(), cudaMemcpyHostToDevice));
  p.x = static_cast<uint8_t*>(dx.get()) + c.x_offset * xs;
  p.w = dw.get();
  p.bias = db.get();
  p.y = dy.get();
  ASSERT_CUDA_OK(SkinnyGemmCuda(p, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> got(want.size());
  ASSERT_CUDA_OK(
      cudaMemcpy(got.data(), dy.get(), got.size(), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < c.rows * c.n; ++i) {
    ASSERT_EQ(std::memcmp(&got[i * ys], &want[i * ys], ys), 0)
        << "row " << i / c.n << " col " << i % c.n << ": got "
        << LoadFloat(got.data(), c.y_type, i) << " want "
        << LoadFloat(want.data(), c.y_type, i);
  }
}

std::vector<HalfIoCase> HalfIoCases() {
  const ElementType f32 = ElementType::kF32, f16 = ElementType::kF16,
                    bf16 = ElementType::kBF16;
  std::vector<HalfIoCase> cases;
  for (ElementType t : {f16, bf16}) {
    // x and y of W's type (the engine's case), each row-group size.
    for (int64_t rows : {1, 7, 16, 64})
      cases.push_back({t, t, t, rows, 37, 1000, 0});
    cases.push_back({t, t, t, 9, 5, 301, 0});  // odd k: scalar x loads
    cases.push_back({t, t, t, 3, 6, 512, 1});  // unaligned x
    cases.push_back({t, t, f32, 7, 13, 777, 0});
    cases.push_back({t, f32, t, 7, 13, 777, 0});
    // A bias of y's type (the model's q|k|v and fc1 with half activations).
    for (int64_t rows : {1, 16, 64})
      cases.push_back({t, t, t, rows, 37, 1000, 0, t});
    cases.push_back({t, t, t, 3, 6, 512, 1, t});
    cases.push_back({t, f32, t, 9, 5, 301, 0, t});
  }
  // Activation types other than W's, and fp32 W.
  cases.push_back({f16, bf16, f16, 5, 11, 1000, 0});
  cases.push_back({f32, f16, bf16, 5, 11, 1000, 0});
  cases.push_back({f32, bf16, bf16, 8, 37, 256, 0});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, SkinnyGemmHalfIoGpuTest,
                         ::testing::ValuesIn(HalfIoCases()), HalfIoName);

using SkinnyGemmRefusalTest = h3::testing::GpuTest;

TEST_F(SkinnyGemmRefusalTest, InvalidValueOutsideTheContract) {
  DeviceBuffer buffer;
  ASSERT_CUDA_OK(buffer.Reserve(1 << 20));
  auto* f = static_cast<float*>(buffer.get());
  SkinnyGemmParams p{.x = f,
                     .w = f + 1024,
                     .w_type = ElementType::kF16,
                     .y = f + 4096,
                     .rows = 65,
                     .n = 4,
                     .k = 64};
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaErrorInvalidValue);  // rows
  p.rows = 1;
  p.k = 12289;
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaErrorInvalidValue);  // k
  p.k = 64;
  p.w_type = ElementType::kI8;
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaErrorInvalidValue);  // type
  p.w_type = ElementType::kF16;
  p.x_type = ElementType::kF64;
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaErrorInvalidValue);  // x_type
  p.x_type = ElementType::kF16;
  p.y_type = ElementType::kI8;
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaErrorInvalidValue);  // y_type
  p.y_type = ElementType::kBF16;
  p.bias = f + 8192;
  p.bias_type = ElementType::kF16;  // neither fp32 nor y's type
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaErrorInvalidValue);  // bias_type
  p.bias_type = ElementType::kBF16;
  EXPECT_EQ(SkinnyGemmCuda(p, nullptr), cudaSuccess);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace h3::kernels
