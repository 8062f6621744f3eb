// GPU tests of H3PrefillCuda's contract (which path it takes, which
// arguments it refuses, where the end shift state goes in its ring) and of
// H3KernelSpectrumCuda against the CPU twin H3KernelSpectrum (label gpu:
// skipped without a device).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/h3_prefill.h"
#include "kernels/cuda/h3_prefill_cufft.h"
#include "kernels/cuda/h3_prefill_test_support.h"
#include "kernels/h3.h"
#include "tests/support/gpu_test.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::RandomH3Layer;
using testing::DeviceTensor;
using testing::Inputs;
using testing::NormalisedError;

// H3KernelSpectrumCuda against H3KernelSpectrum, normalised per head: the
// same taps (double sums rounded once, an ulp apart) through fp32 FFTs,
// cuFFT against kissfft, each within about log2(nfft) 2^-24 (1e-6 at 2^16
// points) of the exact transform relative to the head's spectrum.
constexpr double kSpectrumBound = 1e-5;

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

class H3PrefillCudaTest : public h3::testing::GpuTest {};

TEST_F(H3PrefillCudaTest, ChoosesTheFusedKernelWhereItApplies) {
  const RandomH3Layer hybrid({96, 1, 64}, 4), pure({64, 8, 16}, 5);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(hybrid.weights(), {H3PrefillPath::kFused}, &op));
  EXPECT_EQ(op->path(), H3PrefillPath::kFused) << op->reason();
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(hybrid.weights(), {H3PrefillPath::kCufft}, &op));
  EXPECT_EQ(op->path(), H3PrefillPath::kCufft) << op->reason();
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(pure.weights(), {H3PrefillPath::kFused}, &op));
  EXPECT_EQ(op->path(), H3PrefillPath::kCufft);
  EXPECT_NE(op->reason().find("head_dim 8"), std::string::npos) << op->reason();
  // The chunked kernel on request, in the fused kernel's domain only.
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(hybrid.weights(), {H3PrefillPath::kChunked}, &op));
  EXPECT_EQ(op->path(), H3PrefillPath::kChunked) << op->reason();
  EXPECT_TRUE(op->RunsFused(SequenceLayout::ChannelMajor(96, 100)));
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(pure.weights(), {H3PrefillPath::kChunked}, &op));
  EXPECT_EQ(op->path(), H3PrefillPath::kCufft);
  EXPECT_NE(op->reason().find("chunked kernel does not support head_dim 8"),
            std::string::npos)
      << op->reason();
}

TEST_F(H3PrefillCudaTest, RunsFusedWhereItsKernelsTakeTheLayout) {
  const RandomH3Layer wide({96, 1, 64}, 4), narrow({1, 1, 64}, 4);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(wide.weights(), {H3PrefillPath::kFused}, &op));
  EXPECT_TRUE(op->RunsFused(SequenceLayout::ChannelMajor(96, 100)));
  EXPECT_FALSE(op->RunsFused(SequenceLayout::TokenMajor(96, 100)));
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(narrow.weights(), {H3PrefillPath::kFused}, &op));
  // With one channel the token-major layout is the channel-major one.
  EXPECT_TRUE(op->RunsFused(SequenceLayout::TokenMajor(1, 100)));
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(narrow.weights(), {H3PrefillPath::kCufft}, &op));
  EXPECT_FALSE(op->RunsFused(SequenceLayout::ChannelMajor(1, 100)));
  // The chunked path takes token-major layouts too (its packed-rows form)
  // where d_model and the time stride are multiples of 8; so does its
  // shift-MMA variant.
  for (H3PrefillPath path :
       {H3PrefillPath::kChunked, H3PrefillPath::kChunkedMma}) {
    ASSERT_CUDA_OK(H3PrefillCuda::Create(wide.weights(), {path}, &op));
    EXPECT_TRUE(op->RunsFused(SequenceLayout::TokenMajor(96, 100)));
    EXPECT_TRUE(op->RunsFused({0, 3 * 96, 1}));  // the q|k|v rows
    EXPECT_FALSE(op->RunsFused({0, 100, 1}));
  }
  const RandomH3Layer odd({20, 1, 64}, 4);
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(odd.weights(), {H3PrefillPath::kChunked}, &op));
  EXPECT_FALSE(op->RunsFused(SequenceLayout::TokenMajor(20, 100)));
}

TEST_F(H3PrefillCudaTest, RejectsBadShapes) {
  RandomH3Layer layer({16, 1, 64}, 6);
  std::unique_ptr<H3PrefillCuda> op;
  H3Weights w = layer.weights();
  w.shape = {16, 1, 63};  // odd d_state
  EXPECT_EQ(H3PrefillCuda::Create(w, {}, &op), cudaErrorInvalidValue);
  w.shape = {16, 3, 64};  // head_dim does not divide d_model
  EXPECT_EQ(H3PrefillCuda::Create(w, {}, &op), cudaErrorInvalidValue);
  w = layer.weights();
  w.dA = nullptr;
  EXPECT_EQ(H3PrefillCuda::Create(w, {}, &op), cudaErrorInvalidValue);
  EXPECT_EQ(op, nullptr);
}

// Bad arguments are InvalidValue, both through the dispatcher and on the
// cuFFT path called directly; empty calls succeed and touch nothing.
TEST_F(H3PrefillCudaTest, RejectsBadArgumentsAndIgnoresEmptyCalls) {
  const H3Shape shape{16, 1, 64};
  const RandomH3Layer layer(shape, 7);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(layer.weights(), {H3PrefillPath::kCufft}, &op));
  std::unique_ptr<H3PrefillCufft> cufft;
  ASSERT_CUDA_OK(H3PrefillCufft::Create(op->device_weights(), &cufft));

  const int64_t length = 5;
  const Inputs in(shape, 1, length, ElementType::kF32, 30);
  DeviceBuffer q, k, v, out, shift, diag;
  ASSERT_CUDA_OK(testing::CopyToDevice(in.q, &q));
  ASSERT_CUDA_OK(testing::CopyToDevice(in.k, &k));
  ASSERT_CUDA_OK(testing::CopyToDevice(in.v, &v));
  const std::vector<float> sentinel(in.q.size(), 12345.0f);
  ASSERT_CUDA_OK(testing::CopyToDevice(sentinel, &out));
  ASSERT_CUDA_OK(testing::CopyToDevice(in.state.shift, &shift));
  ASSERT_CUDA_OK(testing::CopyToDevice(in.state.diag, &diag));
  H3PrefillCudaParams good;
  good.batch = 1;
  good.length = length;
  good.layout = SequenceLayout::TokenMajor(shape.d_model, length);
  good.q = q.get();
  good.k = k.get();
  good.v = v.get();
  good.out = out.get();
  good.shift_state = shift.as<float>();
  good.diag_state = diag.as<float>();

  std::vector<H3PrefillCudaParams> bad(9, good);
  bad[0].length = -1;
  bad[1].batch = -1;
  bad[2].q = nullptr;
  bad[3].k = nullptr;
  bad[4].v = nullptr;
  bad[5].out = nullptr;
  bad[6].shift_state = nullptr;
  bad[7].diag_state = nullptr;
  bad[8].start = -1;
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(op->Run(bad[i], nullptr), cudaErrorInvalidValue) << i;
    EXPECT_EQ(cufft->Run(bad[i], nullptr), cudaErrorInvalidValue) << i;
  }
  H3PrefillCudaParams aliased = good;
  aliased.out = const_cast<void*>(aliased.q);
  EXPECT_EQ(cufft->Run(aliased, nullptr), cudaErrorInvalidValue);
  H3PrefillCudaParams bad_type = good;
  bad_type.type = static_cast<ElementType>(7);
  EXPECT_EQ(cufft->Run(bad_type, nullptr), cudaErrorInvalidValue);

  // Empty calls: nothing is read (null pointers pass) or written.
  H3PrefillCudaParams empty;
  empty.batch = 0;
  empty.length = 3;
  EXPECT_EQ(op->Run(empty, nullptr), cudaSuccess);
  EXPECT_EQ(cufft->Run(empty, nullptr), cudaSuccess);
  empty.batch = 2;
  empty.length = 0;
  EXPECT_EQ(op->Run(empty, nullptr), cudaSuccess);
  EXPECT_EQ(cufft->Run(empty, nullptr), cudaSuccess);
  H3PrefillCudaParams no_tokens = good;
  no_tokens.length = 0;
  EXPECT_EQ(op->Run(no_tokens, nullptr), cudaSuccess);
  EXPECT_EQ(cufft->Run(no_tokens, nullptr), cudaSuccess);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> out_after(sentinel.size()),
      shift_after(in.state.shift.size()), diag_after(in.state.diag.size());
  ASSERT_CUDA_OK(testing::CopyToHost(out, &out_after));
  ASSERT_CUDA_OK(testing::CopyToHost(shift, &shift_after));
  ASSERT_CUDA_OK(testing::CopyToHost(diag, &diag_after));
  EXPECT_EQ(out_after, sentinel);
  EXPECT_EQ(shift_after, in.state.shift);
  EXPECT_EQ(diag_after, in.state.diag);

  // H3KernelSpectrumCuda's own checks.
  float* spectrum = out.as<float>();
  EXPECT_EQ(H3KernelSpectrumCuda(op->device_weights(), 3, spectrum, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(H3KernelSpectrumCuda(op->device_weights(), 0, spectrum, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(H3KernelSpectrumCuda(op->device_weights(), 8, nullptr, nullptr),
            cudaErrorInvalidValue);

  // The good call runs (the arguments above were bad for their own reason).
  EXPECT_EQ(op->Run(good, nullptr), cudaSuccess);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_CUDA_OK(testing::CopyToHost(out, &out_after));
  EXPECT_NE(out_after, sentinel);
}

// (prefer, channel_major)
using RingCase = std::tuple<H3PrefillPath, bool>;

class H3PrefillRingGpuTest : public h3::testing::GpuTestWithParam<RingCase> {};

// The end shift state is the old ring with the call's last min(L, N) inputs
// written into slots (start + u) mod N, bit for bit, whatever the other
// slots held: calls shorter than N (one wrapping the ring), one longer, and
// one at position 0 (whose earlier slots, nonzero here, stay as they were).
TEST_P(H3PrefillRingGpuTest, WritesTheLastInputsIntoTheirSlots) {
  const auto [prefer, channel_major] = GetParam();
  const H3Shape shape{16, 1, 64};
  const int d = shape.d_model, n = shape.d_state, batch = 2;
  const RandomH3Layer layer(shape, 9);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {prefer}, &op));
  struct Call {
    int64_t start, length;
  };
  for (const Call call : {Call{62, 3}, Call{5, 1}, Call{130, 70}, Call{0, 10},
                          Call{1000, 2049}}) {
    SCOPED_TRACE("start " + std::to_string(call.start) + " length " +
                 std::to_string(call.length));
    const Inputs in(shape, batch, call.length, ElementType::kF32, 50);
    const SequenceLayout layout =
        channel_major ? SequenceLayout::ChannelMajor(d, call.length)
                      : SequenceLayout::TokenMajor(d, call.length);
    auto tensor = [&] {
      return DeviceTensor{batch, call.length, d, ElementType::kF32, layout};
    };
    DeviceTensor q = tensor(), k = tensor(), v = tensor(), o = tensor();
    ASSERT_CUDA_OK(testing::Upload(in.q, &q));
    ASSERT_CUDA_OK(testing::Upload(in.k, &k));
    ASSERT_CUDA_OK(testing::Upload(in.v, &v));
    ASSERT_CUDA_OK(o.memory.Reserve(o.bytes()));
    DeviceBuffer shift, diag;
    ASSERT_CUDA_OK(testing::CopyToDevice(in.state.shift, &shift));
    ASSERT_CUDA_OK(testing::CopyToDevice(in.state.diag, &diag));
    H3PrefillCudaParams p;
    p.batch = batch;
    p.start = call.start;
    p.length = call.length;
    p.layout = layout;
    p.q = q.memory.get();
    p.k = k.memory.get();
    p.v = v.memory.get();
    p.out = o.memory.get();
    p.shift_state = shift.as<float>();
    p.diag_state = diag.as<float>();
    ASSERT_CUDA_OK(op->Run(p, nullptr));
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> got(in.state.shift.size());
    ASSERT_CUDA_OK(testing::CopyToHost(shift, &got));

    std::vector<float> want = in.state.shift;
    for (int b = 0; b < batch; ++b) {
      for (int c = 0; c < d; ++c) {
        for (int64_t u = std::max<int64_t>(0, call.length - n); u < call.length;
             ++u) {
          want[(b * d + c) * n + (call.start + u) % n] =
              in.k[(b * call.length + u) * d + c];
        }
      }
    }
    EXPECT_EQ(got, want);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, H3PrefillRingGpuTest,
    ::testing::Values(RingCase{H3PrefillPath::kFused, true},
                      RingCase{H3PrefillPath::kFused, false},
                      RingCase{H3PrefillPath::kChunked, true},
                      RingCase{H3PrefillPath::kChunked, false},
                      RingCase{H3PrefillPath::kChunkedMma, true},
                      RingCase{H3PrefillPath::kChunkedMma, false},
                      RingCase{H3PrefillPath::kCufft, true},
                      RingCase{H3PrefillPath::kCufft, false}),
    [](const ::testing::TestParamInfo<RingCase>& info) {
      return std::string(H3PrefillPathName(std::get<0>(info.param))) +
             (std::get<1>(info.param) ? "_channel" : "_token");
    });

// (d_model, head_dim, d_state, nfft)
using SpectrumCase = std::tuple<int, int, int, int>;

class H3KernelSpectrumGpuTest
    : public h3::testing::GpuTestWithParam<SpectrumCase> {};

TEST_P(H3KernelSpectrumGpuTest, MatchesCpuTwin) {
  const auto [d, p, n, nfft] = GetParam();
  const RandomH3Layer layer({d, p, n}, 8);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(layer.weights(), {H3PrefillPath::kCufft}, &op));
  const int heads = d / p, bins = nfft / 2 + 1;
  std::vector<float> want(2 * heads * bins), got(want.size());
  H3KernelSpectrum(layer.weights(), nfft, want.data());
  DeviceBuffer out;
  ASSERT_CUDA_OK(out.Reserve(got.size() * sizeof(float)));
  ASSERT_CUDA_OK(H3KernelSpectrumCuda(op->device_weights(), nfft,
                                      out.as<float>(), nullptr));
  ASSERT_CUDA_OK(testing::CopyToHost(out, &got));
  for (int h = 0; h < heads; ++h) {
    const auto row = [&](const std::vector<float>& v) {
      return std::vector<float>(v.begin() + 2 * h * bins,
                                v.begin() + 2 * (h + 1) * bins);
    };
    EXPECT_LE(NormalisedError(row(got), row(want)), kSpectrumBound)
        << "head " << h;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, H3KernelSpectrumGpuTest,
    ::testing::Values(SpectrumCase{16, 1, 64, 2}, SpectrumCase{16, 1, 64, 256},
                      SpectrumCase{16, 1, 64, 16384},
                      SpectrumCase{96, 1, 64, 65536},
                      SpectrumCase{16, 8, 16, 4096},
                      SpectrumCase{4, 1, 128, 1024},
                      SpectrumCase{12, 3, 10, 64}),
    [](const ::testing::TestParamInfo<SpectrumCase>& info) {
      return "d" + std::to_string(std::get<0>(info.param)) + "_p" +
             std::to_string(std::get<1>(info.param)) + "_N" +
             std::to_string(std::get<2>(info.param)) + "_nfft" +
             std::to_string(std::get<3>(info.param));
    });

}  // namespace
}  // namespace h3::kernels
