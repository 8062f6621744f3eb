#ifndef H3_BENCH_ENGINE_PREFIX_CACHE_H_
#define H3_BENCH_ENGINE_PREFIX_CACHE_H_

#include "absl/status/statusor.h"
#include "bench/engine_table4.h"
#include "engine/runner.h"
#include "nlohmann/json.hpp"

namespace h3::bench {

// --what prefix-cache: what a prefix-cache snapshot costs against the
// prefill it saves. For prefixes of --prompt-len / 8, / 4, / 2 and 1 times
// --prompt-len tokens, --reps times each on a new token path: the prefill of
// the prefix into a fresh slot in one step, PrefixCache::Save of that slot
// (its K/V and H3 states copied into the cache), and Restore into another
// slot; seconds of each, bytes per snapshot, and per-token costs. The runner
// must have been made with the cache on and no interval.
absl::StatusOr<nlohmann::ordered_json> RunPrefixCache(
    engine::Runner& runner, const EngineBenchFlags& flags);

}  // namespace h3::bench

#endif  // H3_BENCH_ENGINE_PREFIX_CACHE_H_
