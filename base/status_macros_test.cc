#include "base/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace h3 {
namespace {

absl::Status FailIf(bool fail) {
  return fail ? absl::InvalidArgumentError("bad") : absl::OkStatus();
}

absl::Status Chain(bool fail, int* reached) {
  H3_RETURN_IF_ERROR(FailIf(fail));
  ++*reached;
  return absl::OkStatus();
}

TEST(StatusMacrosTest, ReturnIfErrorPassesErrorsThrough) {
  int reached = 0;
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
  absl::Status s = Chain(true, &reached);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad");
  EXPECT_EQ(reached, 1);
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(int v) {
  if (v < 0) return absl::OutOfRangeError("negative");
  return std::make_unique<int>(v);
}

absl::StatusOr<int> Twice(int v) {
  // Two uses in one function exercise the per-line temporary names; the
  // move-only value exercises the move.
  H3_ASSIGN_OR_RETURN(std::unique_ptr<int> a, MakeInt(v));
  H3_ASSIGN_OR_RETURN(auto b, MakeInt(v));
  return *a + *b;
}

TEST(StatusMacrosTest, AssignOrReturnAssignsOrReturns) {
  absl::StatusOr<int> ok = Twice(21);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 42);
  absl::StatusOr<int> bad = Twice(-1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
}

TEST(StatusMacrosTest, ExpressionIsEvaluatedOnce) {
  int calls = 0;
  auto count = [&]() -> absl::StatusOr<int> { return ++calls; };
  auto f = [&]() -> absl::Status {
    H3_ASSIGN_OR_RETURN(int x, count());
    H3_RETURN_IF_ERROR(x == 1 ? absl::OkStatus() : absl::InternalError("x"));
    return absl::OkStatus();
  };
  EXPECT_TRUE(f().ok());
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace h3
