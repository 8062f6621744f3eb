#include "tokenizer/stop_strings.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace h3::tokenizer {
namespace {

struct Streamed {
  std::string text;
  int stop_index = -1;
  std::vector<std::string> pieces;  // what Add returned, piece by piece
};

// Feeds `text` cut at `cuts` and collects the output.
Streamed Stream(const std::vector<std::string>& stops, const std::string& text,
                const std::vector<size_t>& cuts) {
  StopStringMatcher m = StopStringMatcher::Create(stops).value();
  Streamed out;
  size_t from = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(text.size());
  for (size_t end : ends) {
    StopStringMatcher::Result r = m.Add(text.substr(from, end - from));
    out.pieces.push_back(r.text);
    out.text += r.text;
    if (r.stop_index >= 0) out.stop_index = r.stop_index;
    from = end;
  }
  out.text += m.Finish();
  return out;
}

TEST(StopStringMatcher, StopsAcrossPiecesAndNeverLeaks) {
  const Streamed s = Stream({"STOP"}, "Hello world. STOP here", {14, 15, 16});
  EXPECT_EQ(s.text, "Hello world. ");
  EXPECT_EQ(s.stop_index, 0);
  // "ST" and "O" were held back, never emitted.
  EXPECT_EQ(s.pieces[0], "Hello world. ");
  EXPECT_EQ(s.pieces[1], "");
  EXPECT_EQ(s.pieces[2], "");
}

TEST(StopStringMatcher, HeldBackTextIsFlushedAtTheEnd) {
  const Streamed s = Stream({"END!"}, "almost the EN", {5});
  EXPECT_EQ(s.pieces.back(), "t the ");  // "EN" held back
  EXPECT_EQ(s.text, "almost the EN");    // and returned by Finish
  EXPECT_EQ(s.stop_index, -1);
}

TEST(StopStringMatcher, FirstCompletedStopWins) {
  EXPECT_EQ(Stream({"abcd", "c"}, "xxabcd", {}).text, "xxab");
  EXPECT_EQ(Stream({"abcd", "c"}, "xxabcd", {}).stop_index, 1);
  EXPECT_EQ(Stream({"bc", "abc"}, "xabcx", {}).text,
            "x");  // same end: earliest start
  EXPECT_EQ(Stream({"\n\n", "User:"}, "answer\n\nUser: hi", {7}).text,
            "answer");
}

TEST(StopStringMatcher, ResultDoesNotDependOnHowTextIsCut) {
  std::mt19937 rng(3);
  const std::string alphabet = "ab\xC3\xA9 ";  // 'é' as two bytes
  for (int round = 0; round < 2000; ++round) {
    // Random text over a tiny alphabet (whole characters), random stops.
    std::vector<std::string> units = {"a", "b", "\xC3\xA9", " "};
    std::string text;
    std::vector<size_t> boundaries;
    for (int i = 0; i < 20; ++i) {
      text += units[rng() % units.size()];
      boundaries.push_back(text.size());
    }
    std::vector<std::string> stops;
    for (int k = 0; k < 2; ++k) {
      std::string stop;
      for (int i = 0, n = 1 + rng() % 3; i < n; ++i)
        stop += units[rng() % units.size()];
      stops.push_back(stop);
    }
    // Expected: the stop with the earliest end in the whole text.
    size_t best_end = std::string::npos, best_start = std::string::npos;
    for (const std::string& stop : stops) {
      const size_t at = text.find(stop);
      if (at == std::string::npos) continue;
      if (at + stop.size() < best_end ||
          (at + stop.size() == best_end && at < best_start)) {
        best_end = at + stop.size();
        best_start = at;
      }
    }
    const std::string expected =
        best_start == std::string::npos ? text : text.substr(0, best_start);
    std::vector<size_t> cuts;
    for (size_t b : boundaries) {
      if (b < text.size() && rng() % 2 == 0) cuts.push_back(b);
    }
    const Streamed s = Stream(stops, text, cuts);
    ASSERT_EQ(s.text, expected)
        << text << " | " << stops[0] << " | " << stops[1];
    ASSERT_EQ(s.stop_index >= 0, best_start != std::string::npos);
  }
}

TEST(StopStringMatcher, RefusesEmptyAndInvalidStops) {
  EXPECT_EQ(StopStringMatcher::Create({"ok", ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StopStringMatcher::Create({"\xFF"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Stream({}, "no stops at all", {3}).text, "no stops at all");
}

}  // namespace
}  // namespace h3::tokenizer
