#ifndef H3_KERNELS_CUDA_LAUNCH_ORDER_H_
#define H3_KERNELS_CUDA_LAUNCH_ORDER_H_

// How a kernel launch is ordered after the kernel before it on its stream
// (kernels/cuda/launch_order.cuh launches and waits accordingly).

namespace h3::kernels {

enum class LaunchOrder {
  // It starts once the kernel before it has finished: CUDA's stream order.
  kAfterPrior,
  // Programmatic dependent launch (compute capability 9.0 and later; on
  // older devices the same as kAfterPrior): the kernel may start while the
  // one before it still runs, once every block of that one has started.
  // Before it waits (every thread, for the kernel before to finish and its
  // writes to be visible) it only reads what no kernel writes (weights,
  // biases, norm parameters) and writes nothing, so the overlap hides its
  // launch and those reads behind the kernel before. Every kernel that
  // takes a LaunchOrder lets the next one start as soon as its own blocks
  // have all started. A launch of anything else in between (cuBLASLt,
  // copies) keeps CUDA's stream order, and since each kernel waits for the
  // one before, which waited for its own, a kernel never sees an older
  // kernel's writes unfinished.
  kOverlapPrior,
};

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_LAUNCH_ORDER_H_
