// The whole model on the CUDA backend against the same model on the CPU
// backend (the specification), and held to the decode path's own
// invariants: a batch equals each sequence alone, graphs on equal graphs
// off. Label gpu: skips without a device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_engine_fixture.h"
#include "engine/runner.h"
#include "gtest/gtest.h"
#include "kernels/sampling.h"
#include "loader/model_file.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"

namespace h3::engine {
namespace {

using h3::testing::Feed;
using h3::testing::FeedEach;
using h3::testing::NormalisedError;

// fp32 weights: the same arithmetic up to summation order (cuBLAS, the cuFFT
// convolution, the on-chip softmax), so logits agree to ~1e-6 relative per
// op; 1e-4 leaves room for 64 steps of accumulation through the recurrent
// state and still fails on any wrong index or missing term.
TEST_F(CudaEngineTest, Fp32GreedyTokensAndLogitsMatchTheCpuOver64Steps) {
  for (int64_t head_dim : {1, 2}) {
    Open(head_dim);
    auto cpu = Load("cpu", std::nullopt);
    auto gpu = Load("cuda", ElementType::kF32);
    ASSERT_NE(cpu, nullptr);
    ASSERT_NE(gpu, nullptr);
    const std::vector<int32_t> prompt = Tokens(100, 1, config_.vocab_size);
    std::vector<int32_t> cpu_tokens, gpu_tokens;
    const std::vector<float> want = Greedy(*cpu, prompt, 64, &cpu_tokens);
    const std::vector<float> got = Greedy(*gpu, prompt, 64, &gpu_tokens);
    EXPECT_EQ(gpu_tokens, cpu_tokens) << "head_dim " << head_dim;
    EXPECT_LT(NormalisedError(got, want), 1e-4) << "head_dim " << head_dim;
  }
}

// 16-bit weights: every weight and every product input is rounded to 11
// (fp16) or 8 (bf16) significant bits, i.e. relative errors of 2^-12 and
// 2^-9 per element, accumulated in fp32; through 3 layers and the LM head
// the logits move by a few times that. The fused prefill kernel adds its
// own fp16 rounding (docs/flashconv.md, ~1e-3).
TEST_F(CudaEngineTest, SixteenBitWeightsStayCloseToTheCpu) {
  Open(1);
  const std::vector<int32_t> prompt = Tokens(150, 2, config_.vocab_size);
  const std::vector<float> want = CpuGreedy(prompt, 8);
  ASSERT_FALSE(want.empty());
  for (auto [type, bound] : kSixteenBitBounds) {
    auto gpu = Load("cuda", type);
    ASSERT_NE(gpu, nullptr);
    std::vector<int32_t> tokens;
    const std::vector<float> got = Greedy(*gpu, prompt, 8, &tokens);
    EXPECT_LT(NormalisedError(got, want), bound) << ElementTypeName(type);
  }
}

// The same with prefill attention on tensor cores (--attention flash), one
// head of 64: the kernel rounds queries, keys, values and weights to the
// 16-bit type (kernels/flash_attention.h), relative errors of the same
// 2^-12 / 2^-9 per element as the weights', so the same bounds hold. The
// logits differ from the fp32 kernel's, which shows the path ran.
TEST_F(CudaEngineTest, FlashAttentionStaysCloseToTheCpu) {
  Open(1, /*n_heads=*/1);
  // 150 tokens: prefill over three 64-key tiles, then decode steps.
  const std::vector<int32_t> prompt = Tokens(150, 3, config_.vocab_size);
  const std::vector<float> want = CpuGreedy(prompt, 8);
  ASSERT_FALSE(want.empty());
  for (auto [type, bound] : kSixteenBitBounds) {
    auto flash = Load("cuda", type, true, 48, AttentionKernel::kFlash);
    auto fma = Load("cuda", type, true, 48, AttentionKernel::kFma);
    ASSERT_NE(flash, nullptr);
    ASSERT_NE(fma, nullptr);
    std::vector<int32_t> tokens;
    const std::vector<float> got = Greedy(*flash, prompt, 8, &tokens);
    const std::vector<float> fp32 = Greedy(*fma, prompt, 8, &tokens);
    EXPECT_LT(NormalisedError(got, want), bound) << ElementTypeName(type);
    EXPECT_NE(got, fp32) << ElementTypeName(type);
  }
}

// The same with --decode-products stream: the decode steps' products and
// the prompt's (48 rows, so at most 64) by StreamGemmCuda, which rounds x
// to the weights' type as cuBLASLt's route does, so the same bounds; with
// half activations too. Its logits differ from cuBLASLt's (another
// summation order; the baseline names kCublasLt, since kAuto also takes
// StreamGemmCuda for a step of one row), which shows the kernel ran. With
// stream-split (compute capability 9.0 and later) the prompt's 48 rows run
// on StreamSplitGemmCuda, with tile (9.0 and later, half activations only:
// it takes x of the weights' type) on TileGemmCuda; with measured, each
// product on whichever kernel was fastest here (it may be cuBLASLt
// everywhere, so no difference is asked of it), and the backend reports its
// choices for both row buckets.
TEST_F(CudaEngineTest, StreamDecodeProductsStayCloseToTheCpu) {
  Open(1);
  const std::vector<int32_t> prompt = Tokens(48, 4, config_.vocab_size);
  const std::vector<float> want = CpuGreedy(prompt, 8);
  ASSERT_FALSE(want.empty());
  int major = 0;
  ASSERT_EQ(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
      cudaSuccess);
  for (auto [type, bound] : kSixteenBitBounds) {
    for (bool half : {false, true}) {
      for (DecodeProducts products :
           {DecodeProducts::kStream, DecodeProducts::kStreamSplit,
            DecodeProducts::kMeasured, DecodeProducts::kTile}) {
        if (products == DecodeProducts::kStreamSplit && major < 9) continue;
        if (products == DecodeProducts::kTile && (major < 9 || !half)) {
          continue;
        }
        BackendOptions options{.device = "cuda", .weight_type = type};
        options.half_activations = half;
        options.decode_products = DecodeProducts::kCublasLt;
        auto cublas = Load(options, true, 48);
        options.decode_products = products;
        auto stream = Load(options, true, 48);
        ASSERT_NE(cublas, nullptr);
        ASSERT_NE(stream, nullptr);
        std::vector<int32_t> tokens;
        const std::vector<float> got = Greedy(*stream, prompt, 8, &tokens);
        const std::vector<float> lt = Greedy(*cublas, prompt, 8, &tokens);
        const std::string name = " " + DecodeProductsName(products);
        EXPECT_LT(NormalisedError(got, want), bound)
            << ElementTypeName(type) << name
            << (half ? " half activations" : "");
        if (products == DecodeProducts::kMeasured) {
          const std::string choices =
              stream->model().backend().DescribeProductChoices();
          EXPECT_NE(choices.find("rows<=1 "), std::string::npos) << choices;
          EXPECT_NE(choices.find("rows<=48 "), std::string::npos) << choices;
        } else {
          EXPECT_NE(got, lt) << ElementTypeName(type) << name;
        }
      }
    }
  }
}

// The same with each H3 prefill kernel named: chunked (what the default,
// auto, takes with 16-bit weights) and the fused FlashConv kernel (fft).
// Both have fp16 tensor operands (kernels/h3_chunked.h), so the same bounds;
// their logits differ, which shows each ran. Prompt chunks of 48 tokens (the
// fixture's) leave partial columns and state passing between calls.
TEST_F(CudaEngineTest, ChunkedH3PrefillStaysCloseToTheCpu) {
  Open(1);
  const std::vector<int32_t> prompt = Tokens(150, 4, config_.vocab_size);
  const std::vector<float> want = CpuGreedy(prompt, 8);
  ASSERT_FALSE(want.empty());
  for (auto [type, bound] : kSixteenBitBounds) {
    BackendOptions options{"cuda", type};
    options.h3_prefill = H3PrefillKernel::kChunked;
    auto chunked = Load(options);
    options.h3_prefill = H3PrefillKernel::kFft;
    auto fused = Load(options);
    ASSERT_NE(chunked, nullptr);
    ASSERT_NE(fused, nullptr);
    std::vector<int32_t> tokens;
    const std::vector<float> got = Greedy(*chunked, prompt, 8, &tokens);
    const std::vector<float> fft = Greedy(*fused, prompt, 8, &tokens);
    EXPECT_LT(NormalisedError(got, want), bound) << ElementTypeName(type);
    EXPECT_LT(NormalisedError(fft, want), bound) << ElementTypeName(type);
    EXPECT_NE(got, fft) << ElementTypeName(type);
  }
}

// Five sequences at different positions fed a token each in one step,
// against each alone: rows never mix, though a different batch may choose a
// different matrix product algorithm (summation order), hence a bound
// rather than equality.
TEST_F(CudaEngineTest, ABatchEqualsEachSequenceAlone) {
  Open(1);
  for (ElementType type : {ElementType::kF32, ElementType::kF16}) {
    auto gpu = Load("cuda", type);
    ASSERT_NE(gpu, nullptr);
    const int64_t row = config_.padded_vocab_size;
    constexpr int kBatch = 5, kSteps = 6;
    std::vector<SlotId> together, alone;
    std::vector<float> logits;
    for (int b = 0; b < kBatch; ++b) {
      const auto prompt = Tokens(3 + 29 * b, 10 + b, config_.vocab_size);
      for (auto* list : {&together, &alone}) {
        list->push_back(*gpu->memory().Acquire());
        ASSERT_TRUE(Feed(*gpu, list->back(), prompt, &logits).ok());
      }
    }
    for (int step = 0; step < kSteps; ++step) {
      const auto next = Tokens(kBatch, 100 + step, config_.vocab_size);
      std::vector<float> batched, single;
      ASSERT_TRUE(FeedEach(*gpu, together, next, &batched).ok());
      for (int b = 0; b < kBatch; ++b) {
        ASSERT_TRUE(Feed(*gpu, alone[b], {&next[b], 1}, &single).ok());
        const std::vector<float> mine(batched.begin() + b * row,
                                      batched.begin() + (b + 1) * row);
        EXPECT_LT(NormalisedError(mine, single),
                  type == ElementType::kF32 ? 1e-5 : 1e-3)
            << ElementTypeName(type) << " step " << step << " row " << b;
      }
    }
  }
}

// A mixed step (single tokens of some sequences and prompt chunks of
// others in one forward: the packed-rows path) against each sequence fed
// alone.
TEST_F(CudaEngineTest, AMixedStepEqualsEachSequenceAlone) {
  Open(1);
  auto gpu = Load("cuda", ElementType::kF32);
  ASSERT_NE(gpu, nullptr);
  const int64_t row = config_.padded_vocab_size;
  const std::vector<int> lengths = {1, 40, 1, 97, 1, 5};
  std::vector<SlotId> mixed, alone;
  std::vector<std::vector<int32_t>> feeds;
  std::vector<float> logits;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const auto prompt = Tokens(11 + 3 * i, 50 + i, config_.vocab_size);
    for (auto* list : {&mixed, &alone}) {
      list->push_back(*gpu->memory().Acquire());
      ASSERT_TRUE(Feed(*gpu, list->back(), prompt, &logits).ok());
    }
    feeds.push_back(Tokens(lengths[i], 70 + i, config_.vocab_size));
  }
  StepPlan plan;
  for (size_t i = 0; i < lengths.size(); ++i) {
    plan.sequences.push_back(
        {.slot = mixed[i], .tokens = feeds[i], .logits = true});
  }
  StepResult result;
  ASSERT_TRUE(gpu->Execute(plan, &result).ok());
  for (size_t i = 0; i < lengths.size(); ++i) {
    ASSERT_TRUE(Feed(*gpu, alone[i], feeds[i], &logits).ok());
    const float* got = result.LogitsOf(i);
    ASSERT_NE(got, nullptr);
    EXPECT_LT(NormalisedError(std::vector<float>(got, got + row), logits), 1e-5)
        << "entry " << i << " of " << lengths[i] << " tokens";
  }
}

// The same padded steps replayed from a captured graph or run op by op:
// the same kernels on the same inputs, so the logits are identical.
TEST_F(CudaEngineTest, GraphsOnAndOffGiveIdenticalLogits) {
  std::unique_ptr<Runner> with, without;
  ASSERT_NO_FATAL_FAILURE(LoadGraphsOnAndOff(&with, &without));
  // Batch sizes that share and that change buckets, each replayed.
  for (int batch : {1, 3, 3, 4, 9, 9, 2}) {
    std::vector<SlotId> slots_a, slots_b;
    for (int i = 0; i < batch; ++i) {
      const auto prompt = Tokens(5 + 7 * i, batch * 10 + i, config_.vocab_size);
      for (auto [runner, slots] : {std::pair{with.get(), &slots_a},
                                   std::pair{without.get(), &slots_b}}) {
        slots->push_back(*runner->memory().Acquire());
        ASSERT_TRUE(Feed(*runner, slots->back(), prompt, nullptr).ok());
      }
    }
    for (int step = 0; step < 3; ++step) {
      const auto next = Tokens(batch, step, config_.vocab_size);
      std::vector<float> a, b;
      ASSERT_TRUE(FeedEach(*with, slots_a, next, &a).ok());
      ASSERT_TRUE(FeedEach(*without, slots_b, next, &b).ok());
      EXPECT_EQ(a, b) << "batch " << batch << " step " << step;
    }
    for (SlotId s : slots_a) with->memory().Release(s);
    for (SlotId s : slots_b) without->memory().Release(s);
  }
  // A failed capture would have run the steps op by op.
  EXPECT_TRUE(with->capture_error().ok()) << with->capture_error();
}

// Runner::WarmUp on the GPU: every bucket up to the slots' captured, and
// the sequences after it get the logits of a runner that was not warmed.
TEST_F(CudaEngineTest, WarmUpCapturesEveryBucketAndChangesNoSequence) {
  std::unique_ptr<Runner> warm, cold;
  ASSERT_NO_FATAL_FAILURE(LoadGraphsOnAndOff(&warm, &cold));
  absl::StatusOr<int> steps = warm->WarmUp();
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(*steps, 5);  // 16 slots: buckets 1, 2, 4, 8, 16
  EXPECT_TRUE(warm->capture_error().ok()) << warm->capture_error();
  for (int batch : {1, 3}) {
    std::vector<SlotId> slots_a, slots_b;
    for (int i = 0; i < batch; ++i) {
      const auto prompt = Tokens(9 + 5 * i, batch * 20 + i, config_.vocab_size);
      for (auto [runner, slots] :
           {std::pair{warm.get(), &slots_a}, std::pair{cold.get(), &slots_b}}) {
        slots->push_back(*runner->memory().Acquire());
        ASSERT_TRUE(Feed(*runner, slots->back(), prompt, nullptr).ok());
      }
    }
    for (int step = 0; step < 3; ++step) {
      const auto next = Tokens(batch, step + 7, config_.vocab_size);
      std::vector<float> a, b;
      ASSERT_TRUE(FeedEach(*warm, slots_a, next, &a).ok());
      ASSERT_TRUE(FeedEach(*cold, slots_b, next, &b).ok());
      EXPECT_EQ(a, b) << "batch " << batch << " step " << step;
    }
    for (SlotId s : slots_a) warm->memory().Release(s);
    for (SlotId s : slots_b) cold->memory().Release(s);
  }
}

// --batch-invariant (BackendOptions::batch_invariant): every product is the
// skinny kernel (or, with batch_invariant_kernel kCublasLt, cuBLASLt on one
// pinned algorithm per shape; with kStream, StreamGemmCuda; with
// kStreamSplit, StreamSplitGemmCuda, and with kTile TileGemmCuda, where the
// device has clusters), and the other ops
// of a decode step are per row already (docs/cuda-engine.md), so a sequence's
// logits are bitwise those it gets alone, in a batch of 7 or 64 (buckets 8 and
// 64, graphs on) at any row; with 16-bit activations too (--half-activations).
TEST_F(CudaEngineTest, BatchInvariantLogitsAreBitwiseTheSameInAnyBatch) {
  Open(1);
  constexpr int kSteps = 3;
  const int64_t row = config_.padded_vocab_size, vocab = config_.vocab_size;
  const auto prompt = Tokens(37, 7, vocab);
  const auto feed = Tokens(kSteps, 8, vocab);
  for (auto [type, half, kernel] :
       {std::tuple{ElementType::kF16, false, BatchInvariantKernel::kSkinny},
        std::tuple{ElementType::kBF16, false, BatchInvariantKernel::kSkinny},
        std::tuple{ElementType::kF16, true, BatchInvariantKernel::kSkinny},
        std::tuple{ElementType::kF16, false, BatchInvariantKernel::kCublasLt},
        std::tuple{ElementType::kBF16, true, BatchInvariantKernel::kCublasLt},
        std::tuple{ElementType::kF16, false, BatchInvariantKernel::kStream},
        std::tuple{ElementType::kBF16, true, BatchInvariantKernel::kStream},
        std::tuple{ElementType::kF16, true, BatchInvariantKernel::kStreamSplit},
        std::tuple{ElementType::kBF16, false,
                   BatchInvariantKernel::kStreamSplit},
        std::tuple{ElementType::kF16, true, BatchInvariantKernel::kTile},
        std::tuple{ElementType::kBF16, true, BatchInvariantKernel::kTile}}) {
    auto backend = MakeBackend({.device = "cuda",
                                .weight_type = type,
                                .batch_invariant = true,
                                .batch_invariant_kernel = kernel,
                                .half_activations = half});
    if ((kernel == BatchInvariantKernel::kStreamSplit ||
         kernel == BatchInvariantKernel::kTile) &&
        backend.status().code() == absl::StatusCode::kFailedPrecondition) {
      continue;  // a device without thread-block clusters
    }
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto runner = h3::testing::MakeRunner(*file_, *std::move(backend),
                                          /*slots=*/64, /*context=*/512, 48);
    ASSERT_TRUE(runner.ok()) << runner.status();
    Runner& gpu = **runner;
    std::vector<std::vector<float>> alone(kSteps);
    const SlotId slot = *gpu.memory().Acquire();
    ASSERT_TRUE(Feed(gpu, slot, prompt, nullptr).ok());
    for (int step = 0; step < kSteps; ++step) {
      ASSERT_TRUE(Feed(gpu, slot, {&feed[step], 1}, &alone[step]).ok());
    }
    gpu.memory().Release(slot);
    for (auto [batch, at] :
         {std::pair{7, 0}, std::pair{7, 3}, std::pair{7, 6}, std::pair{64, 0},
          std::pair{64, 37}, std::pair{64, 63}}) {
      std::vector<SlotId> slots;
      for (int b = 0; b < batch; ++b) {
        slots.push_back(*gpu.memory().Acquire());
        const auto mine = b == at ? prompt : Tokens(5 + b % 40, 200 + b, vocab);
        ASSERT_TRUE(Feed(gpu, slots.back(), mine, nullptr).ok());
      }
      for (int step = 0; step < kSteps; ++step) {
        auto next = Tokens(batch, 300 + step, vocab);
        next[at] = feed[step];
        std::vector<float> logits;
        ASSERT_TRUE(FeedEach(gpu, slots, next, &logits).ok());
        EXPECT_EQ(std::memcmp(logits.data() + at * row, alone[step].data(),
                              row * sizeof(float)),
                  0)
            << ElementTypeName(type) << (half ? " half activations" : "") << " "
            << BatchInvariantKernelName(kernel) << ": row " << at << " of "
            << batch << ", step " << step;
      }
      for (SlotId s : slots) gpu.memory().Release(s);
    }
  }
}

// --batch-invariant in a mixed step of 104 rows (the skinny kernel's
// products in pieces of 64; the pinned cuBLASLt algorithm's in one call):
// single tokens and prompt chunks alike equal each sequence fed alone,
// bitwise (the prompts are cut at the same prefill_chunk boundaries).
TEST_F(CudaEngineTest, BatchInvariantMixedStepEqualsEachSequenceAloneBitwise) {
  Open(1);
  const auto check = [&](BatchInvariantKernel kernel) {
    auto backend = MakeBackend({.device = "cuda",
                                .weight_type = ElementType::kF16,
                                .batch_invariant = true,
                                .batch_invariant_kernel = kernel});
    if ((kernel == BatchInvariantKernel::kStreamSplit ||
         kernel == BatchInvariantKernel::kTile) &&
        backend.status().code() == absl::StatusCode::kFailedPrecondition) {
      return;  // a device without thread-block clusters
    }
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto runner = h3::testing::MakeRunner(*file_, *std::move(backend), 16, 512,
                                          /*prefill_chunk=*/48);
    ASSERT_TRUE(runner.ok()) << runner.status();
    Runner& gpu = **runner;
    const int64_t row = config_.padded_vocab_size;
    const std::vector<int> lengths = {1, 97, 1, 5};
    std::vector<SlotId> mixed, alone;
    std::vector<std::vector<int32_t>> feeds;
    StepPlan plan;
    for (size_t i = 0; i < lengths.size(); ++i) {
      const auto prompt = Tokens(9 + 4 * i, 80 + i, config_.vocab_size);
      for (auto* list : {&mixed, &alone}) {
        list->push_back(*gpu.memory().Acquire());
        ASSERT_TRUE(Feed(gpu, list->back(), prompt, nullptr).ok());
      }
      feeds.push_back(Tokens(lengths[i], 90 + i, config_.vocab_size));
    }
    for (size_t i = 0; i < lengths.size(); ++i) {
      plan.sequences.push_back(
          {.slot = mixed[i], .tokens = feeds[i], .logits = true});
    }
    StepResult result;
    ASSERT_TRUE(gpu.Execute(plan, &result).ok());
    std::vector<float> logits;
    for (size_t i = 0; i < lengths.size(); ++i) {
      ASSERT_TRUE(Feed(gpu, alone[i], feeds[i], &logits).ok());
      ASSERT_NE(result.LogitsOf(i), nullptr);
      EXPECT_EQ(
          std::memcmp(result.LogitsOf(i), logits.data(), row * sizeof(float)),
          0)
          << "entry " << i << " of " << lengths[i] << " tokens";
    }
  };
  for (BatchInvariantKernel kernel :
       {BatchInvariantKernel::kSkinny, BatchInvariantKernel::kCublasLt,
        BatchInvariantKernel::kStream, BatchInvariantKernel::kStreamSplit,
        BatchInvariantKernel::kTile}) {
    SCOPED_TRACE(BatchInvariantKernelName(kernel));
    check(kernel);
  }
}

// State passing on the GPU: a prompt prefilled in one step (three H3
// prefill calls of up to 48 tokens) and fed token by token leave the same
// state.
TEST_F(CudaEngineTest, PrefillEqualsTokenByTokenDecoding) {
  Open(1);
  auto gpu = Load("cuda", ElementType::kF32);
  ASSERT_NE(gpu, nullptr);
  const auto tokens = Tokens(130, 5, config_.vocab_size);
  std::vector<float> prefilled, stepped;
  const SlotId a = *gpu->memory().Acquire(), b = *gpu->memory().Acquire();
  ASSERT_TRUE(Feed(*gpu, a, tokens, &prefilled).ok());
  for (size_t i = 0; i < tokens.size(); ++i) {
    ASSERT_TRUE(Feed(*gpu, b, {&tokens[i], 1}, &stepped).ok());
  }
  EXPECT_LT(NormalisedError(prefilled, stepped), 1e-4);
}

// Sampling on the device, inside the captured decode step: the ids are the
// specification's (SampleCpu) on the logits the step returned, with a
// history kept on the host; graphs on and off draw the same ids. The
// kernel may differ from the CPU where fp32 rounding moves a top-p or draw
// boundary (kernels/cuda/sampling.h): a few of 5 x 24 draws, never a greedy
// row's.
TEST_F(CudaEngineTest, DeviceSamplingDrawsTheSpecificationsIds) {
  std::unique_ptr<Runner> with, without;
  ASSERT_NO_FATAL_FAILURE(LoadGraphsOnAndOff(&with, &without));
  const int32_t vocab = static_cast<int32_t>(config_.vocab_size);
  const std::vector<kernels::SamplingRow> params = {
      {.temperature = 0.0f},
      {.temperature = 1.0f, .seed = 11},
      {.temperature = 0.7f, .top_k = 8, .seed = 12},
      {.temperature = 1.3f, .top_p = 0.8f, .min_p = 0.05f, .seed = 13},
      {.temperature = 1.0f,
       .repetition_penalty = 1.4f,
       .presence_penalty = 0.5f,
       .frequency_penalty = 0.5f,
       .seed = 14},
  };
  const size_t n = params.size();  // 5: the bucket of 8 pads three rows
  std::vector<SlotId> slots_a, slots_b;
  std::vector<std::vector<int32_t>> counts(n, std::vector<int32_t>(vocab));
  std::vector<std::vector<uint8_t>> flags(n, std::vector<uint8_t>(vocab));
  std::vector<int32_t> next(n);
  for (size_t i = 0; i < n; ++i) {
    const auto prompt = Tokens(9 + 5 * i, 40 + i, vocab);
    for (int32_t id : prompt) flags[i][id] |= kernels::kTokenInPrompt;
    flags[i][(7 * i) % vocab] |= kernels::kTokenBanned;
    for (auto [runner, slots] : {std::pair{with.get(), &slots_a},
                                 std::pair{without.get(), &slots_b}}) {
      slots->push_back(*runner->memory().Acquire());
      ASSERT_TRUE(runner->memory().SetTokenFlags(slots->back(), flags[i]).ok());
      ASSERT_TRUE(Feed(*runner, slots->back(), prompt, nullptr).ok());
    }
    next[i] = prompt.back();
  }
  int differences = 0;
  std::vector<kernels::SamplingRow> rows = params;
  for (int step = 0; step < 24; ++step) {
    for (auto& r : rows) r.step = step;
    StepPlan plan_a, plan_b;
    for (size_t i = 0; i < n; ++i) {
      plan_a.sequences.push_back({.slot = slots_a[i],
                                  .tokens = absl::MakeConstSpan(&next[i], 1),
                                  .sample = true,
                                  .sampling = rows[i],
                                  .logits = true});
      plan_b.sequences.push_back({.slot = slots_b[i],
                                  .tokens = absl::MakeConstSpan(&next[i], 1),
                                  .sample = true,
                                  .sampling = rows[i]});
    }
    StepResult result_a, result_b;
    ASSERT_TRUE(with->Execute(plan_a, &result_a).ok());
    ASSERT_TRUE(without->Execute(plan_b, &result_b).ok());
    const std::vector<int32_t>& a = result_a.ids;
    EXPECT_EQ(a, result_b.ids) << "graphs on and off, step " << step;
    for (size_t i = 0; i < n; ++i) {
      kernels::TokenHistory h{counts[i].data(), flags[i].data()};
      int32_t want = -1;
      kernels::SampleParams p;
      p.batch = 1;
      p.vocab_size = vocab;
      p.row_stride = config_.padded_vocab_size;
      p.logits = result_a.LogitsOf(i);
      p.rows = &rows[i];
      p.histories = &h;
      p.ids = &want;
      kernels::SampleCpu(p);
      ASSERT_EQ(flags[i][a[i]] & kernels::kTokenBanned, 0);
      if (a[i] != want) {
        ASSERT_GT(params[i].temperature, 0.0f) << "greedy row, step " << step;
        ++differences;
        --counts[i][want];  // follow the device's draw
        ++counts[i][a[i]];
      }
    }
    next = a;
  }
  EXPECT_LE(differences, 3);
}

}  // namespace
}  // namespace h3::engine
