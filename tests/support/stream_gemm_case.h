#ifndef H3_TESTS_SUPPORT_STREAM_GEMM_CASE_H_
#define H3_TESTS_SUPPORT_STREAM_GEMM_CASE_H_

// Cases, operands and the plain reference of the decode product's tests
// (kernels/stream_gemm.h): its CPU emulation test and its GPU kernel test
// share them.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/element_type.h"
#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/skinny_gemm.h"
#include "kernels/stream_gemm.h"
#include "tests/support/random.h"

namespace h3::testing {

struct StreamCase {
  ElementType w_type = ElementType::kF16;
  bool half_x = false;  // x of w_type, else fp32
  bool half_y = false;  // y (and a bias) of w_type, else fp32
  bool bias = false;
  bool gelu = false;
  int64_t rows = 1, n = 16, k = 64;
};

inline std::string StreamCaseName(const StreamCase& c) {
  return std::string(ElementTypeName(c.w_type)) + "_" + std::to_string(c.rows) +
         "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         (c.half_x ? "_halfx" : "") + (c.half_y ? "_halfy" : "") +
         (c.bias ? "_bias" : "") + (c.gelu ? "_gelu" : "");
}

// Operands in their types' bytes: x [rows, k] N(0, 1), W [n, k] N(0, 1/k),
// bias [n] N(0, 1).
struct StreamOperands {
  std::vector<uint8_t> x, w, bias;
};

inline std::vector<uint8_t> Encode(const std::vector<float>& v,
                                   ElementType type, float scale) {
  std::vector<uint8_t> bytes(v.size() * ElementSize(type));
  for (size_t i = 0; i < v.size(); ++i) {
    StoreFloat(bytes.data(), type, static_cast<int64_t>(i), v[i] * scale);
  }
  return bytes;
}

inline ElementType XType(const StreamCase& c) {
  return c.half_x ? c.w_type : ElementType::kF32;
}
inline ElementType YType(const StreamCase& c) {
  return c.half_y ? c.w_type : ElementType::kF32;
}

inline StreamOperands MakeStreamOperands(const StreamCase& c, uint32_t seed) {
  StreamOperands o;
  o.x = Encode(RandomNormal(c.rows * c.k, seed), XType(c), 1.0f);
  o.w = Encode(RandomNormal(c.n * c.k, seed + 1), c.w_type,
               1.0f / std::sqrt(static_cast<float>(c.k)));
  o.bias = Encode(RandomNormal(c.n, seed + 2), YType(c), 1.0f);
  return o;
}

// The params of case c over operands o and an output y (host or device).
inline kernels::StreamGemmParams StreamParams(const StreamCase& c,
                                              const void* x, const void* w,
                                              const void* bias, void* y) {
  return {.x = x,
          .x_type = XType(c),
          .w = w,
          .w_type = c.w_type,
          .bias = c.bias ? bias : nullptr,
          .bias_type = YType(c),
          .y = y,
          .y_type = YType(c),
          .rows = c.rows,
          .n = c.n,
          .k = c.k,
          .gelu = c.gelu};
}

// y in fp32 from the exact sum (in double) of x rounded to W's type times W,
// then the fp32 epilogue; not rounded to y's type.
inline std::vector<float> StreamReference(const StreamCase& c,
                                          const StreamOperands& o) {
  // x and W decoded once (a type dispatch per product made the 1.3B shapes'
  // references take seconds).
  std::vector<float> x(c.rows * c.k), w(c.n * c.k);
  for (int64_t i = 0; i < c.rows * c.k; ++i) {
    x[i] = RoundToType(LoadFloat(o.x.data(), XType(c), i), c.w_type);
  }
  for (int64_t i = 0; i < c.n * c.k; ++i) {
    w[i] = LoadFloat(o.w.data(), c.w_type, i);
  }
  std::vector<float> y(c.rows * c.n);
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < c.n; ++j) {
      const float* const xr = x.data() + r * c.k;
      const float* const wj = w.data() + j * c.k;
      double sum = 0;
      for (int64_t e = 0; e < c.k; ++e) sum += double{xr[e]} * wj[e];
      float v = static_cast<float>(sum);
      if (c.bias) v += LoadFloat(o.bias.data(), YType(c), j);
      if (c.gelu) v = kernels::SkinnyGeluTanh(v);
      y[r * c.n + j] = v;
    }
  }
  return y;
}

// The bound on max |y - reference| / max |reference|: fp32 accumulation
// over at most k / 16 MMAs and 8 partial sums errs by a few 2^-24 of the
// partial sums (outputs ~N(0, 2), max ~6: ~1e-6 normalised), through GELU's
// slope (1.13) and its own few ulps; a 16-bit y adds its rounding, half an
// ulp (u = 2^-11 fp16, 2^-8 bf16) of the output.
inline double StreamTolerance(const StreamCase& c) {
  double bound = 2e-5;
  if (c.half_y) {
    bound += std::ldexp(1.0, c.w_type == ElementType::kBF16 ? -8 : -11);
  }
  return bound;
}

// Every element is one product, once: with W = e_i (a one at column i of
// its one row) and x[e] = e, run(params) must give y = i, for every i of a
// k = 200 whose last step is partial. The first i that does not, or -1. x
// is fp32, or fp16 with `half_x` (e is exact in either).
template <typename Run>
int64_t FirstElementNotCountedOnce(Run run, bool half_x = false) {
  constexpr int64_t k = 200;
  StreamCase c{.half_x = half_x, .rows = 1, .n = 1, .k = k};
  std::vector<uint8_t> x(k * 4), w(k * 2), y(4);
  for (int64_t i = 0; i < k; ++i) StoreFloat(x.data(), XType(c), i, i);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t e = 0; e < k; ++e) {
      StoreFloat(w.data(), ElementType::kF16, e, e == i ? 1.0f : 0.0f);
    }
    run(StreamParams(c, x.data(), w.data(), nullptr, y.data()));
    if (LoadFloat(y.data(), ElementType::kF32, 0) != i) return i;
  }
  return -1;
}

// As a batch-invariant product must: row 5 of 64 rows of case c (its n,
// k and types) computed alone gives the bits it gets at the start, middle
// and end of batches of 7 and 64. run(case, operands, &y) computes y (on
// a GPU, or the emulator).
template <typename Run>
void ExpectARowGetsTheSameBitsInAnyBatch(StreamCase c, Run run) {
  c.rows = 64;
  const StreamOperands all = MakeStreamOperands(c, 23);
  const size_t x_row = c.k * ElementSize(XType(c));
  const size_t y_row = c.n * ElementSize(YType(c));
  constexpr int64_t kRow = 5;  // the row under test
  StreamCase one = c;
  one.rows = 1;
  StreamOperands alone = all;
  alone.x.assign(all.x.begin() + kRow * x_row,
                 all.x.begin() + (kRow + 1) * x_row);
  std::vector<uint8_t> want;
  run(one, alone, &want);
  for (const int64_t size : {7, 64}) {
    for (const int64_t at : {int64_t{0}, size / 2, size - 1}) {
      StreamCase batch = c;
      batch.rows = size;
      StreamOperands in = all;
      in.x.resize(size * x_row);
      std::copy(alone.x.begin(), alone.x.end(), in.x.begin() + at * x_row);
      std::vector<uint8_t> got;
      run(batch, in, &got);
      ASSERT_EQ(got.size(), size * y_row);
      ASSERT_EQ(std::memcmp(got.data() + at * y_row, want.data(), y_row), 0)
          << "row at " << at << " of " << size;
    }
  }
}

// x of W's 16-bit type gives the bits that the same values give as fp32 x
// (which the kernels round to W's type: exactly, for these values). For
// the split kernel from 17 rows this holds its shared-x kernel (16-bit x)
// to its L1 kernel's bits (fp32 x), for every 16-bit type and row tile
// count it serves. run(case, operands, &y) computes y.
template <typename Run>
void ExpectFloatXGivesTheSameBits(Run run) {
  for (const ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    for (const int64_t rows : {17, 40, 64}) {
      const StreamCase c{.w_type = type,
                         .half_x = true,
                         .bias = true,
                         .rows = rows,
                         .n = 300,
                         .k = 1096};
      const StreamOperands half = MakeStreamOperands(c, 29);
      StreamCase wide = c;
      wide.half_x = false;
      StreamOperands o = half;
      o.x.assign(c.rows * c.k * sizeof(float), 0);
      for (int64_t i = 0; i < c.rows * c.k; ++i) {
        StoreFloat(o.x.data(), ElementType::kF32, i,
                   LoadFloat(half.x.data(), type, i));
      }
      std::vector<uint8_t> want, got;
      run(c, half, &want);
      run(wide, o, &got);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
          << StreamCaseName(c);
    }
  }
}

// y of case c as floats, from its type's bytes.
inline std::vector<float> DecodeY(const StreamCase& c,
                                  const std::vector<uint8_t>& y) {
  std::vector<float> out(c.rows * c.n);
  for (int64_t i = 0; i < c.rows * c.n; ++i) {
    out[i] = LoadFloat(y.data(), YType(c), i);
  }
  return out;
}

// Rows, n and k that reach every tail: one row and every row-tile count
// (rows 8, 9, 17, 33, 64), n below, at and past a block's 16 columns, k
// under one step, an unfinished step and unfinished rounds of 8 warps; and
// k of 4104 and 8200, warps of 9 and 17 steps: many rounds of
// StreamGemmCuda's loads (4 steps a round at one row tile, 2 at two, 1
// from three), each with a partial last round, at 1, 9 and 33 rows.
inline std::vector<StreamCase> StreamCases() {
  std::vector<StreamCase> cases;
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    for (auto [rows, n, k] :
         std::vector<std::array<int64_t, 3>>{{1, 37, 1032},
                                             {3, 16, 8},
                                             {8, 5, 72},
                                             {9, 33, 520},
                                             {17, 16, 4096},
                                             {33, 21, 64},
                                             {64, 40, 2056},
                                             {1, 24, 8200},
                                             {9, 20, 4104},
                                             {33, 21, 8200}}) {
      for (int variant = 0; variant < 4; ++variant) {
        StreamCase c{.w_type = type, .rows = rows, .n = n, .k = k};
        c.half_x = variant & 1;
        c.half_y = variant >= 2;
        c.bias = variant != 0;
        c.gelu = variant == 3;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_STREAM_GEMM_CASE_H_
