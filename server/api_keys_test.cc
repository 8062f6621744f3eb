#include "server/api_keys.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace h3::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kFile[] =
    "# team keys\n"
    "alice:aaaaaaaaaaaaaaaaaaaa\n"
    "\n"
    "  bbbbbbbbbbbbbbbbbbbbbbbb  \r\n"
    "ci.bot-1:c:cccccccccccccccccc\n";

TEST(ApiKeysTest, ParsesNamedAndBareKeys) {
  absl::StatusOr<ApiKeys> keys = ApiKeys::Parse(kFile);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->size(), 3u);
  AuthFailure failure;
  EXPECT_EQ(*keys->Authenticate("Bearer aaaaaaaaaaaaaaaaaaaa", &failure),
            "alice");
  EXPECT_EQ(*keys->Authenticate("bearer bbbbbbbbbbbbbbbbbbbbbbbb", &failure),
            "line-4");
  // A key may hold ':' after its name.
  EXPECT_EQ(*keys->Authenticate("Bearer c:cccccccccccccccccc", &failure),
            "ci.bot-1");
}

TEST(ApiKeysTest, RefusesWhatIsNotAValidKey) {
  const ApiKeys keys = *ApiKeys::Parse(kFile);
  struct Case {
    std::string authorization;
    AuthFailure failure;
  };
  for (const Case& c : std::vector<Case>{
           {"", AuthFailure::kMissing},
           {"aaaaaaaaaaaaaaaaaaaa", AuthFailure::kMalformed},
           {"Basic aaaaaaaaaaaaaaaaaaaa", AuthFailure::kMalformed},
           {"Bearer aaaaaaaaaaaaaaaaaaab", AuthFailure::kUnknownKey},
           {"Bearer aaaaaaaaaaaaaaaaaaa", AuthFailure::kUnknownKey},
           {"Bearer aaaaaaaaaaaaaaaaaaaaa", AuthFailure::kUnknownKey},
           {"Bearer alice", AuthFailure::kUnknownKey},
           {"Bearer ", AuthFailure::kUnknownKey}}) {
    AuthFailure failure = AuthFailure::kMissing;
    absl::StatusOr<std::string> name =
        keys.Authenticate(c.authorization, &failure);
    EXPECT_EQ(name.status().code(), absl::StatusCode::kUnauthenticated)
        << c.authorization;
    EXPECT_EQ(failure, c.failure) << c.authorization;
  }
}

TEST(ApiKeysTest, MalformedFilesNameTheLineNotTheKey) {
  struct Case {
    std::string text;
    std::string problem;
  };
  for (const Case& c : std::vector<Case>{
           {"", "holds no key"},
           {"# only a comment\n", "holds no key"},
           {"short-key\n", "line 1: the key has 9 characters; it needs 16"},
           {"a:ddddddddddddddddd\nb:ddddddddddddddddd\n",
            "line 2: the same key appears"},
           {"a:ddddddddddddddddd\na:eeeeeeeeeeeeeeeeeee\n",
            "line 2: the name \"a\" is used twice"},
           {"bad name:ddddddddddddddddd\n", "line 1: the name before ':'"},
           {":ddddddddddddddddd\n", "line 1: the name before ':'"},
           {"x:dddddddd ddddddddd\n", "line 1: the key holds a space"},
           {std::string(300, 'k') + "\n", "it needs 16 to 256"}}) {
    absl::StatusOr<ApiKeys> keys = ApiKeys::Parse(c.text);
    ASSERT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument)
        << c.text;
    EXPECT_THAT(keys.status().message(), HasSubstr(c.problem));
    EXPECT_THAT(keys.status().message(), Not(HasSubstr("ddddddd")));
  }
}

TEST(ApiKeysTest, LoadNamesAMissingFile) {
  absl::StatusOr<ApiKeys> keys = ApiKeys::Load("/nonexistent/keys.txt");
  EXPECT_FALSE(keys.ok());
  EXPECT_THAT(keys.status().message(), HasSubstr("/nonexistent/keys.txt"));
}

}  // namespace
}  // namespace h3::server
