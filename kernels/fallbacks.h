#ifndef H3_KERNELS_FALLBACKS_H_
#define H3_KERNELS_FALLBACKS_H_

// An escape hatch for GPU paths that replaced an older one and have not yet
// run on every GPU: the environment variable H3_CUDA_FALLBACKS, a
// comma-separated list read once per process, turns each path it names off
// in favour of the one it replaced, so that a machine where a new kernel
// misbehaves can still serve and be measured without a rebuild:
//
//   rows             the chunked H3 prefill on packed rows -> transposes
//                    around the channel-major chunked kernel
//   stream-split     StreamSplitGemmCuda under --decode-products
//                    stream-split and measured -> cuBLASLt (as before
//                    compute capability 9.0; --batch-invariant-kernel
//                    stream-split is an explicit choice and stays)
//   tile             TileGemmCuda under --decode-products tile and
//                    measured -> cuBLASLt (--batch-invariant-kernel tile
//                    is an explicit choice and stays)
//   pdl              --pdl on -> launches in stream order (--pdl off)
//
// Names not in this list are ignored. docs/cuda-engine.md, "Fallbacks".

#include <string_view>

namespace h3::kernels {

// Whether the comma-separated `list` holds `name` (spaces around entries
// ignored).
bool FallbackListHas(std::string_view list, std::string_view name);

// Whether H3_CUDA_FALLBACKS, as it was at the first call, names `name`.
bool KernelFallback(std::string_view name);

}  // namespace h3::kernels

#endif  // H3_KERNELS_FALLBACKS_H_
