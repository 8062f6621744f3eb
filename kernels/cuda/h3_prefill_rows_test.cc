// GPU tests of the chunked H3 prefill on packed rows
// (h3_prefill_rows_kernel.cu, both shift convolutions): the engine's call,
// q, k and v read from the
// q|k|v product's rows [R, 3d] and out written into [R, d], equals bit for
// bit the same segments from separate token-major tensors; and the rows
// kernel computes what the channel-major chunked kernel computes, on the
// same inputs (label gpu: skipped without a device). Against the CPU twin:
// the token-major chunked cases of h3_prefill_test.cc.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/h3_prefill.h"
#include "kernels/cuda/h3_prefill_packed_support.h"
#include "kernels/cuda/h3_prefill_test_support.h"
#include "kernels/h3.h"
#include "tests/support/gpu_test.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::RandomH3Layer;
using testing::DeviceTensor;
using testing::ExpectAllWritten;
using testing::ExpectSameBytes;
using testing::NormalisedError;
using testing::Packed;
using testing::Stream;

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// d_model 24: three blocks of 8 channels.
const H3Shape kShape{24, 1, 64};
// Lengths across tile boundaries (256) and partial columns (16), starts
// at 0 and past d_state (the ring matters), random states.
const std::vector<int64_t> kLengths = {1, 17, 255, 256, 700, 1500};
const std::vector<int64_t> kStarts = {0, 100, 70001, 0, 63, 130};

// q, k, v of `packed` (token-major [R, d]) copied into the columns of one
// [R, 3d] q|k|v buffer, as the engine's q|k|v product writes them.
cudaError_t QkvRows(const Packed& packed, DeviceBuffer* qkv) {
  const int64_t rows = packed.q.length, d = packed.q.d;
  const size_t size = ElementSize(packed.q.type);
  cudaError_t err = qkv->Reserve(3 * rows * d * size);
  const DeviceTensor* parts[] = {&packed.q, &packed.k, &packed.v};
  for (int i = 0; i < 3 && err == cudaSuccess; ++i) {
    err = cudaMemcpy2D(static_cast<char*>(qkv->get()) + i * d * size,
                       3 * d * size, parts[i]->memory.get(), d * size, d * size,
                       rows, cudaMemcpyDeviceToDevice);
  }
  return err;
}

// The engine's call over `packed`'s segments: q|k|v rows (time 3d), out
// with its own row stride d.
H3PrefillPackedParams RowsCall(const Packed& packed, const DeviceBuffer& qkv,
                               std::vector<H3PrefillSegment>* segments) {
  const int64_t d = packed.q.d;
  *segments = packed.segments;
  for (H3PrefillSegment& s : *segments) s.offset = s.offset / d * 3 * d;
  H3PrefillPackedParams p =
      QkvRowsCall(packed.q.type, d, qkv.get(), packed.out.memory.get());
  p.segments = static_cast<int>(segments->size());
  p.seqs = segments->data();
  return p;
}

// (type, path): kChunked (the shift convolution in fp32) or kChunkedMma
// (on tensor cores).
using RowsCase = std::tuple<ElementType, H3PrefillPath>;

class H3PrefillRowsGpuTest : public h3::testing::GpuTestWithParam<RowsCase> {};

TEST_P(H3PrefillRowsGpuTest, QkvRowsEqualSeparateTensorsBitForBit) {
  const auto [type, path] = GetParam();
  const RandomH3Layer layer(kShape, 21);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {path}, &op));
  Packed rows(kLengths, kStarts, type, false, kShape);
  Packed separate(kLengths, kStarts, type, false, kShape);
  ASSERT_TRUE(rows.ok && separate.ok);
  DeviceBuffer qkv;
  ASSERT_CUDA_OK(QkvRows(rows, &qkv));
  std::vector<H3PrefillSegment> segments;
  const H3PrefillPackedParams call = RowsCall(rows, qkv, &segments);
  ASSERT_TRUE(op->RunsRows(call));
  ASSERT_TRUE(op->RunsRows(separate.Params(type)));
  Stream stream;
  ASSERT_CUDA_OK(stream.created);
  ASSERT_CUDA_OK(op->RunPacked(call, stream.stream));
  ASSERT_CUDA_OK(op->RunPacked(separate.Params(type), stream.stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream.stream));
  std::vector<char> got, want;
  ASSERT_CUDA_OK(rows.Bytes(&got));
  ASSERT_CUDA_OK(separate.Bytes(&want));
  ExpectSameBytes(got, want);
  ExpectAllWritten(rows.out);
}

// The same segments through the channel-major chunked kernel with the
// shift convolution in fp32. For kChunked, the same arithmetic in the same
// order, but nvcc contracts multiply-adds differently in the two kernels
// (the scan's complex products, the gate), so their fp32 values differ in
// the last bits; where such a value is then rounded to fp16 for the tensor
// cores (U, X_g), a last-bit difference now and then moves it by one fp16
// step. So the outputs agree within fp16's unit roundoff (bf16's for bf16
// outputs, one rounding of the stored output) for every type (on an H200
// the fp32 cases differed by 1.7e-5 and 3.0e-5), the diagonal states (fp32
// throughout) within 1e-6, and the rings bitwise. kChunkedMma's rows
// kernel sums the shift convolution on tensor cores (two fp16 parts a
// value, h3_rows_shift_mma.cuh): its kbar differs in the last bits too, so
// the same bound on the outputs, and on the diagonal states, sums of R =
// E U, one fp16 step of U (the emulator: 4e-7 to 2.3e-5). An indexing
// error is O(1).
TEST_P(H3PrefillRowsGpuTest, ComputesWhatTheChannelMajorKernelComputes) {
  const auto [type, path] = GetParam();
  const RandomH3Layer layer(kShape, 22);
  std::unique_ptr<H3PrefillCuda> op, reference;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {path}, &op));
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(),
                                       {H3PrefillPath::kChunked}, &reference));
  Packed rows(kLengths, kStarts, type, false, kShape);
  Packed channels(kLengths, kStarts, type, true, kShape);
  ASSERT_TRUE(rows.ok && channels.ok);
  ASSERT_TRUE(op->RunsRows(rows.Params(type)));
  ASSERT_FALSE(reference->RunsRows(channels.Params(type)));
  Stream stream;
  ASSERT_CUDA_OK(stream.created);
  ASSERT_CUDA_OK(op->RunPacked(rows.Params(type), stream.stream));
  ASSERT_CUDA_OK(reference->RunPacked(channels.Params(type), stream.stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream.stream));
  std::vector<float> got, want, got_diag, want_diag, got_ring, want_ring;
  ASSERT_CUDA_OK(testing::Download(rows.out, &got));
  ASSERT_CUDA_OK(testing::Download(channels.out, &want));
  ASSERT_CUDA_OK(testing::CopyToHost(rows.diag, &got_diag));
  ASSERT_CUDA_OK(testing::CopyToHost(channels.diag, &want_diag));
  ASSERT_CUDA_OK(testing::CopyToHost(rows.shift, &got_ring));
  ASSERT_CUDA_OK(testing::CopyToHost(channels.shift, &want_ring));
  const double out_error = NormalisedError(got, want);
  const double diag_error = NormalisedError(got_diag, want_diag);
  RecordProperty("output_error", std::to_string(out_error));
  RecordProperty("diag_error", std::to_string(diag_error));
  const double fp16_step = testing::UnitRoundoff(ElementType::kF16);
  EXPECT_LE(out_error, std::max(testing::UnitRoundoff(type), fp16_step))
      << "outputs";
  EXPECT_LE(diag_error, path == H3PrefillPath::kChunkedMma ? fp16_step : 1e-6)
      << "diagonal state";
  EXPECT_EQ(got_ring, want_ring) << "shift state";
}

// Calls the rows form cannot take (a misaligned tensor, a layer on the
// fused path) with an out row stride of their own are refused: InvalidValue,
// nothing written (no other path takes such a stride).
TEST_P(H3PrefillRowsGpuTest, RefusesAnOutStrideOffItsDomain) {
  const auto [type, path] = GetParam();
  const RandomH3Layer layer(kShape, 23);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {path}, &op));
  Packed rows({5, 9}, {0, 3}, type, false, kShape);
  ASSERT_TRUE(rows.ok);
  DeviceBuffer qkv;
  ASSERT_CUDA_OK(QkvRows(rows, &qkv));
  std::vector<H3PrefillSegment> segments;
  H3PrefillPackedParams call = RowsCall(rows, qkv, &segments);
  std::vector<char> before, after;
  ASSERT_CUDA_OK(rows.Bytes(&before));
  // q one element off its 16-byte alignment: not rows, and cuFFT takes no
  // out stride of its own.
  call.q = static_cast<const char*>(call.q) + ElementSize(type);
  EXPECT_FALSE(op->RunsRows(call));
  EXPECT_EQ(op->RunPacked(call, nullptr), cudaErrorInvalidValue);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_CUDA_OK(rows.Bytes(&after));
  EXPECT_EQ(after, before);

  // A channel-major layer object (the fused path) refuses it too.
  std::unique_ptr<H3PrefillCuda> fused;
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(layer.weights(), {H3PrefillPath::kFused}, &fused));
  call = RowsCall(rows, qkv, &segments);
  EXPECT_FALSE(fused->RunsRows(call));
  EXPECT_EQ(fused->RunPacked(call, nullptr), cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(
    Types, H3PrefillRowsGpuTest,
    ::testing::Combine(::testing::Values(ElementType::kF32, ElementType::kF16,
                                         ElementType::kBF16),
                       ::testing::Values(H3PrefillPath::kChunked,
                                         H3PrefillPath::kChunkedMma)),
    [](const ::testing::TestParamInfo<RowsCase>& i) {
      return std::string(ElementTypeName(std::get<0>(i.param))) + "_" +
             H3PrefillPathName(std::get<1>(i.param));
    });

}  // namespace
}  // namespace h3::kernels
