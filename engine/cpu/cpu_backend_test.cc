#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/half_float.h"
#include "engine/backend.h"
#include "gtest/gtest.h"
#include "kernels/bias_gelu.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::engine {
namespace {

class CpuBackendTest : public ::testing::TestWithParam<Epilogue> {
 protected:
  std::unique_ptr<Backend> backend_ = MakeCpuBackend();
};

TEST_P(CpuBackendTest, LinearIsXTimesWTransposedPlusBias) {
  const int64_t rows = 5, n = 7, k = 33;
  auto x = h3::testing::RandomNormal(rows * k, 1),
       w = h3::testing::RandomNormal(n * k, 2),
       bias = h3::testing::RandomNormal(n, 3);
  std::vector<float> y(rows * n);
  auto matrix = backend_->UploadMatrix(w.data(), n, k);
  ASSERT_TRUE(matrix.ok());
  ASSERT_TRUE(backend_
                  ->Linear({x.data(), &*matrix, bias.data(), y.data(), rows,
                            GetParam()})
                  .ok());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double sum = bias[c];
      for (int64_t i = 0; i < k; ++i)
        sum += double{x[r * k + i]} * w[c * k + i];
      const double want = GetParam() == Epilogue::kGeluTanh
                              ? kernels::GeluTanh(static_cast<float>(sum))
                              : sum;
      EXPECT_NEAR(y[r * n + c], want, 1e-4 * (1 + std::abs(want)));
    }
  }
}

// A mixed step's rows (decode rows and prefill chunks in one product) must
// not depend on each other: each row of a 300-row Linear is bitwise the row
// computed alone, whatever the threads do (kernels/cpu/gemm.h).
TEST_P(CpuBackendTest, LinearRowsAreBitwiseTheSameAloneAndInABatch) {
  const int64_t rows = 300, n = 2000, k = 96;
  auto x = h3::testing::RandomNormal(rows * k, 4),
       w = h3::testing::RandomNormal(n * k, 5),
       bias = h3::testing::RandomNormal(n, 6);
  auto matrix = backend_->UploadMatrix(w.data(), n, k);
  ASSERT_TRUE(matrix.ok());
  std::vector<float> batch(rows * n), alone(n);
  ASSERT_TRUE(backend_
                  ->Linear({x.data(), &*matrix, bias.data(), batch.data(), rows,
                            GetParam()})
                  .ok());
  for (int64_t r : {int64_t{0}, int64_t{7}, int64_t{150}, rows - 1}) {
    ASSERT_TRUE(backend_
                    ->Linear({x.data() + r * k, &*matrix, bias.data(),
                              alone.data(), 1, GetParam()})
                    .ok());
    for (int64_t c = 0; c < n; ++c) {
      ASSERT_EQ(std::memcmp(&batch[r * n + c], &alone[c], sizeof(float)), 0)
          << "row " << r << " column " << c;
    }
  }
}

// 16-bit x and y (half activations): x is read exactly, the product runs
// in fp32 as for fp32 x, and y is that result rounded once to the type;
// likewise with a 16-bit bias.
TEST_P(CpuBackendTest, SixteenBitLinearRoundsTheFp32ResultOnce) {
  const int64_t rows = 4, n = 40, k = 24;
  auto w = h3::testing::RandomNormal(n * k, 8),
       bias = h3::testing::RandomNormal(n, 9);
  auto matrix = backend_->UploadMatrix(w.data(), n, k);
  ASSERT_TRUE(matrix.ok());
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    const int64_t size = ElementSize(type);
    // x16: random values rounded to `type`; x32: the same values in fp32.
    std::vector<uint8_t> x16(rows * k * size), y16(rows * n * size),
        want16(rows * n * size);
    StoreFloats(h3::testing::RandomNormal(rows * k, 10).data(), rows * k,
                x16.data(), type, 0);
    std::vector<float> x32(rows * k), y32(rows * n);
    LoadFloats(x16.data(), type, 0, rows * k, x32.data());
    ASSERT_TRUE(backend_
                    ->Linear({x32.data(), &*matrix, bias.data(), y32.data(),
                              rows, GetParam()})
                    .ok());
    StoreFloats(y32.data(), rows * n, want16.data(), type, 0);
    ASSERT_TRUE(backend_
                    ->Linear({x16.data(), &*matrix, bias.data(), y16.data(),
                              rows, GetParam(), type, type})
                    .ok());
    EXPECT_EQ(y16, want16) << ElementTypeName(type);
    // 16-bit x, fp32 y: the fp32 result itself.
    std::vector<float> y(rows * n);
    ASSERT_TRUE(backend_
                    ->Linear({x16.data(), &*matrix, bias.data(), y.data(), rows,
                              GetParam(), type, ElementType::kF32})
                    .ok());
    EXPECT_EQ(y, y32) << ElementTypeName(type);
    // A bias of y's type (the model's q|k|v and fc1 biases with half
    // activations) is widened exactly and added before the one rounding:
    // round(epilogue(acc + float(bias16))), the fp32 y of the widened bias
    // rounded.
    std::vector<uint8_t> bias16(n * size);
    StoreFloats(bias.data(), n, bias16.data(), type, 0);
    std::vector<float> widened(n);
    LoadFloats(bias16.data(), type, 0, n, widened.data());
    ASSERT_TRUE(backend_
                    ->Linear({x32.data(), &*matrix, widened.data(), y32.data(),
                              rows, GetParam()})
                    .ok());
    StoreFloats(y32.data(), rows * n, want16.data(), type, 0);
    ASSERT_TRUE(backend_
                    ->Linear({x16.data(), &*matrix, bias16.data(), y16.data(),
                              rows, GetParam(), type, type, type})
                    .ok());
    EXPECT_EQ(y16, want16) << ElementTypeName(type) << ", 16-bit bias";
  }
}

// bias_type: fp32, or y's type when y is 16-bit; anything else is refused
// with InvalidArgument naming the field, and y is left alone.
TEST_P(CpuBackendTest, RefusesABiasTypeOtherThanFp32OrY) {
  const int64_t rows = 2, n = 3, k = 4;
  auto w = h3::testing::RandomNormal(n * k, 14);
  auto matrix = backend_->UploadMatrix(w.data(), n, k);
  ASSERT_TRUE(matrix.ok());
  std::vector<uint16_t> x(rows * k, 0), bias(n, 0), y(rows * n, 0xffff);
  constexpr ElementType f16 = ElementType::kF16, bf16 = ElementType::kBF16,
                        f32 = ElementType::kF32;
  const struct {
    ElementType y_type, bias_type;
  } refused[] = {{f16, bf16}, {bf16, f16}, {f32, f16}, {f16, ElementType::kI8}};
  for (const auto& c : refused) {
    std::vector<float> y32(rows * n, 7.0f);
    void* out = c.y_type == f32 ? static_cast<void*>(y32.data()) : y.data();
    const absl::Status status =
        backend_->Linear({x.data(), &*matrix, bias.data(), out, rows,
                          GetParam(), f16, c.y_type, c.bias_type});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << ElementTypeName(c.bias_type) << " bias, "
        << ElementTypeName(c.y_type) << " y";
    EXPECT_NE(status.message().find("bias_type"), std::string::npos) << status;
    EXPECT_EQ(y32, std::vector<float>(rows * n, 7.0f));
  }
  EXPECT_EQ(y, std::vector<uint16_t>(rows * n, 0xffff));
}

INSTANTIATE_TEST_SUITE_P(Epilogues, CpuBackendTest,
                         ::testing::Values(Epilogue::kNone,
                                           Epilogue::kGeluTanh));

TEST(CpuBackendMemoryTest, AllocateFillCopyAndEmbed) {
  auto backend = MakeCpuBackend();
  EXPECT_EQ(backend->name(), "cpu");
  std::vector<float> host = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
  auto table = backend->UploadMatrix(host.data(), 4, 3);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->type(), ElementType::kF32);
  auto out = backend->Allocate(6);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(backend->Fill(out->data(), 6, -1).ok());
  auto ids = backend->AllocateStaging(2 * sizeof(int32_t));
  ASSERT_TRUE(ids.ok());
  static_cast<int32_t*>(ids->host())[0] = 3;
  static_cast<int32_t*>(ids->host())[1] = 1;
  ASSERT_TRUE(backend->Upload(*ids, 2 * sizeof(int32_t)).ok());
  ASSERT_TRUE(backend
                  ->Embedding(static_cast<const int32_t*>(ids->device()), 2,
                              *table, out->data())
                  .ok());
  std::vector<float> got(6);
  ASSERT_TRUE(backend->CopyToHost(out->data(), 6, got.data()).ok());
  EXPECT_EQ(got, (std::vector<float>{30, 31, 32, 10, 11, 12}));
  EXPECT_FALSE(backend->Allocate(-1).ok());
  // Downloads stay inside the staging area, as uploads do.
  EXPECT_TRUE(backend->Download(*ids, 2 * sizeof(int32_t)).ok());
  EXPECT_EQ(backend->Download(*ids, 3 * sizeof(int32_t)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CpuBackendMemoryTest, OpsRefuseBrokenContracts) {
  auto backend = MakeCpuBackend();
  AttentionSegment segments[2];
  segments[0].length = 3;
  segments[0].cache.capacity = 12;
  segments[1].start = 10;
  segments[1].length = 5;
  segments[1].cache.capacity = 12;
  AttentionPrefillParams attention;
  attention.segments = segments;
  EXPECT_EQ(backend->Attention(attention).code(),
            absl::StatusCode::kInvalidArgument);
  segments[1].start = 0;
  segments[1].length = 0;
  EXPECT_EQ(backend->Attention(attention).code(),
            absl::StatusCode::kInvalidArgument);
  const kernels::KvCache cache{nullptr, nullptr, 12};
  const int64_t position = 12;
  kernels::AttentionDecodeParams decode;
  decode.batch = 1;
  decode.caches = &cache;
  decode.positions = &position;
  EXPECT_EQ(backend->AttentionDecode(decode, 12).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(backend->SupportsGraphs());
  EXPECT_EQ(backend->BeginCapture().code(), absl::StatusCode::kUnimplemented);
}

// The CPU H3 layer's guarantee to the scheduler: a sequence's outputs and
// state are the same bits however its prompt is split into prefill chunks,
// and whether its tokens were prefilled or decoded (in a batch with others).
TEST(CpuH3LayerTest, ChunkingAndDecodingDoNotChangeTheBits) {
  const kernels::H3Shape shape{40, 1, 64};
  const h3::testing::RandomH3Layer weights(shape, 7);
  auto backend = MakeCpuBackend();
  auto layer = backend->MakeH3Layer(weights.weights());
  ASSERT_TRUE(layer.ok()) << layer.status();
  const int64_t d = shape.d_model, length = 150;
  const std::vector<float> qkv = h3::testing::RandomNormal(3 * d * length, 8);
  using State = h3::testing::H3StateBuffers;
  auto run = [&](const std::vector<int64_t>& chunks, bool decode_the_rest,
                 State* state) {
    std::vector<float> out(length * d);
    int64_t t = 0;
    for (int64_t c : chunks) {
      EXPECT_TRUE((*layer)
                      ->Prefill({{t, c, state->view()}}, c,
                                qkv.data() + 3 * d * t, out.data() + d * t)
                      .ok());
      t += c;
    }
    // The rest token by token, each beside a second sequence's token.
    State other(shape);
    for (; decode_the_rest && t < length; ++t) {
      const kernels::H3State states[2] = {other.view(), state->view()};
      const int64_t positions[2] = {3, t};
      std::vector<float> rows(6 * d), outs(2 * d);
      std::copy_n(qkv.data() + 3 * d * t, 3 * d, rows.data() + 3 * d);
      EXPECT_TRUE(
          (*layer)->Step(2, rows.data(), outs.data(), states, positions).ok());
      std::copy_n(outs.data() + d, d, out.data() + d * t);
    }
    return out;
  };
  auto same_bits = [](const std::vector<float>& a,
                      const std::vector<float>& b) {
    return a.size() == b.size() &&
           std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  State whole(shape);
  const std::vector<float> want = run({length}, false, &whole);
  for (const std::vector<int64_t>& chunks : std::vector<std::vector<int64_t>>{
           {1, 149}, {64, 64, 22}, {7, 120, 23}}) {
    for (bool decode : {false, true}) {
      State state(shape);
      std::vector<int64_t> prefix = chunks;
      if (decode) prefix.pop_back();  // the last chunk's tokens by steps
      EXPECT_TRUE(same_bits(run(prefix, decode, &state), want))
          << chunks[0] << " " << decode;
      EXPECT_TRUE(same_bits(state.shift, whole.shift));
      EXPECT_TRUE(same_bits(state.diag, whole.diag));
    }
  }
}

}  // namespace
}  // namespace h3::engine
