#ifndef H3_ENGINE_PRODUCT_CHOICES_H_
#define H3_ENGINE_PRODUCT_CHOICES_H_

// The measured decode products (--decode-products measured;
// docs/cuda-engine.md, "Measured products"): the CUDA backend times each
// kernel that takes a product of at most 64 rows on the device at hand, at
// the product's first call outside graph capture, and keeps the fastest for
// every later call of its key. This is the table of those choices; the
// timing is the backend's.

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/element_type.h"
#include "kernels/skinny_gemm.h"

namespace h3::engine {

// The kernels a measured product chooses among.
enum class ProductKernel {
  kCublasLt,  // LinearCuda: cuBLASLt's heuristic's algorithm
  kStream,    // StreamGemmCuda
  kSplit,     // StreamSplitGemmCuda
  kTile,      // TileGemmCuda
};
const char* ProductKernelName(ProductKernel kernel);

// The row bucket a choice holds for: the runner's batch bucket
// (GraphBucket: 1, 2, 4, 8, 16, 24, ..., 64), so every decode batch the
// runner pads to is measured at its own row count, and a prompt's chunks
// share those few measurements.
int64_t ProductRowBucket(int64_t rows);

// What a choice is made for: the row bucket, the shape, the types and the
// epilogue of a product.
struct ProductKey {
  int64_t bucket = 0;
  int64_t n = 0;
  int64_t k = 0;
  ElementType x_type = ElementType::kF32;
  ElementType w_type = ElementType::kF32;
  ElementType y_type = ElementType::kF32;
  ElementType bias_type = ElementType::kF32;
  bool bias = false;
  bool gelu = false;
  auto operator<=>(const ProductKey&) const = default;

  static ProductKey Of(const kernels::SkinnyGemmParams& p);
};

// One kernel's median time on a key (ms; negative: it refused the product).
using KernelTime = std::pair<ProductKernel, float>;

class ProductChoices {
 public:
  // The most keys kept: past it, Choose records nothing (the caller runs
  // its default). A model has a few product shapes times 11 buckets.
  static constexpr size_t kMaxKeys = 1024;

  // The kernel chosen for `key`, or null.
  const ProductKernel* Find(const ProductKey& key) const;

  // The fastest of `times` (the first of equal ones; kCublasLt when every
  // kernel refused), recorded for `key` with the times unless kMaxKeys are
  // kept already.
  ProductKernel Choose(const ProductKey& key,
                       const std::vector<KernelTime>& times);

  size_t size() const { return choices_.size(); }

  // A line per key: "rows<=B NxK x/w/y[ bias][ gelu]: KERNEL (kernel ms,
  // ...)", in key order.
  std::string Describe() const;

 private:
  struct Choice {
    ProductKernel kernel;
    std::vector<KernelTime> times;
  };
  std::map<ProductKey, Choice> choices_;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_PRODUCT_CHOICES_H_
