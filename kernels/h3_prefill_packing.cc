#include "kernels/h3_prefill_packing.h"

#include <string>
#include <vector>

#include "kernels/flashconv.h"

namespace h3::kernels {
namespace {

bool Refuse(std::string* why, std::string text) {
  *why = std::move(text);
  return false;
}

// Whether the last element of a segment, offset + (length - 1) time +
// (d - 1) channel, fits in int64.
bool ExtentFits(const H3PrefillSegment& s, int64_t time, int64_t channel,
                int d) {
  int64_t a, b, sum;
  return !__builtin_mul_overflow(s.length - 1, time, &a) &&
         !__builtin_mul_overflow(int64_t{d} - 1, channel, &b) &&
         !__builtin_add_overflow(a, b, &sum) &&
         !__builtin_add_overflow(sum, s.offset, &sum);
}

}  // namespace

bool CheckPacked(const H3Shape& shape, const H3PrefillPackedParams& p,
                 std::string* why) {
  if (p.segments < 0) {
    return Refuse(why, "segments " + std::to_string(p.segments) + " < 0");
  }
  if (p.segments == 0) return true;
  if (p.seqs == nullptr) return Refuse(why, "seqs is null");
  if (p.type != ElementType::kF32 && p.type != ElementType::kF16 &&
      p.type != ElementType::kBF16) {
    return Refuse(why, "type: not fp32, fp16 or bf16");
  }
  if (p.time <= 0) {
    return Refuse(why, "time stride " + std::to_string(p.time) + " <= 0");
  }
  if (p.channel <= 0) {
    return Refuse(why, "channel stride " + std::to_string(p.channel) + " <= 0");
  }
  if (p.out_time < 0) {
    return Refuse(why,
                  "out time stride " + std::to_string(p.out_time) + " < 0");
  }
  const bool rows = OutTime(p) != p.time;
  if (rows && p.channel != 1) {
    return Refuse(why, "out time stride " + std::to_string(p.out_time) +
                           " differs from the time stride " +
                           std::to_string(p.time) +
                           ": only packed rows (channel stride 1) may");
  }
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.out == nullptr) {
    return Refuse(why, std::string(p.q == nullptr   ? "q"
                                   : p.k == nullptr ? "k"
                                   : p.v == nullptr ? "v"
                                                    : "out") +
                           " is null");
  }
  for (int i = 0; i < p.segments; ++i) {
    const H3PrefillSegment& s = p.seqs[i];
    const std::string at = "segment " + std::to_string(i) + ": ";
    if (s.start < 0) {
      return Refuse(why, at + "start " + std::to_string(s.start) + " < 0");
    }
    if (s.length < 1) {
      return Refuse(why, at + "length " + std::to_string(s.length) + " < 1");
    }
    if (s.offset < 0) {
      return Refuse(why, at + "offset " + std::to_string(s.offset) + " < 0");
    }
    if (s.shift_state == nullptr)
      return Refuse(why, at + "shift_state is null");
    if (s.diag_state == nullptr) return Refuse(why, at + "diag_state is null");
    if (!ExtentFits(s, p.time, p.channel, shape.d_model)) {
      return Refuse(why, at + "offset + (length - 1) * time + (d_model - 1) * "
                              "channel overflows int64");
    }
    if (rows && s.offset % p.time != 0) {
      return Refuse(why, at + "offset " + std::to_string(s.offset) +
                             " is not a whole number of rows of " +
                             std::to_string(p.time) +
                             " (out has a time stride of its own)");
    }
    if (rows) {  // the segment's extent in out
      H3PrefillSegment in_out = s;
      in_out.offset = s.offset / p.time;
      if (__builtin_mul_overflow(in_out.offset, p.out_time, &in_out.offset) ||
          !ExtentFits(in_out, p.out_time, 1, shape.d_model)) {
        return Refuse(why, at + "its rows in out (out time stride " +
                               std::to_string(p.out_time) + ") overflow int64");
      }
    }
  }
  return true;
}

std::vector<PackedLaunch> PlanPackedLaunches(const H3PrefillSegment* segments,
                                             int count, int max_per_launch) {
  std::vector<PackedLaunch> launches;
  if (max_per_launch < 1 || count < 0) return launches;
  for (int size = 0; size < flashconv::kNumFftSizes; ++size) {
    PackedLaunch* open = nullptr;  // this size's launch still filling
    for (int i = 0; i < count; ++i) {
      if (flashconv::FftSizeIndex(segments[i].length) != size) continue;
      if (open == nullptr ||
          static_cast<int>(open->segments.size()) == max_per_launch) {
        launches.push_back({size, {}});
        open = &launches.back();
      }
      open->segments.push_back(i);
    }
  }
  return launches;
}

}  // namespace h3::kernels
