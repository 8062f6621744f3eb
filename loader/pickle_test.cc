#include "loader/pickle.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace h3::loader {
namespace {

using ::testing::HasSubstr;
using Kind = PickleValue::Kind;
using namespace std::string_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

absl::StatusOr<PickleGraph> UnpickleString(const std::string& s) {
  return Unpickle(absl::MakeConstSpan(
      reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

bool Exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

TEST(PickleTest, HostileGlobalsStayInert) {
  // Each payload would create /tmp/h3_loader_hostile_<name> if executed
  // (make_checkpoints.py checks that Python's pickle does run them).
  const std::pair<const char*, const char*> cases[] = {
      {"os_system", "os.system"},
      {"eval", "builtins.eval"},
      {"subprocess", "subprocess.Popen"},
  };
  for (const auto& [name, global] : cases) {
    const std::string marker = std::string("/tmp/h3_loader_hostile_") + name;
    ::unlink(marker.c_str());
    absl::StatusOr<PickleGraph> g = UnpickleString(
        ReadFile(std::string(H3_LOADER_TESTDATA "/hostile_") + name + ".pkl"));
    ASSERT_TRUE(g.ok()) << g.status();
    const PickleValue& root = g->at(g->root());
    EXPECT_EQ(root.kind, Kind::kObject) << name;
    EXPECT_EQ(root.text, global);
    EXPECT_THAT(g->Describe(root), HasSubstr("not executed"));
    usleep(100 * 1000);  // a spawned process would have had time to run
    EXPECT_FALSE(Exists(marker)) << marker << " exists: something ran";
  }
}

TEST(PickleTest, ReadsTorchStateDict) {
  absl::StatusOr<PickleGraph> g = UnpickleString(ReadFile(
      H3_LOADER_SOURCE_DIR "/fuzz/corpus/pickle/small_state_dict.pkl"));
  ASSERT_TRUE(g.ok()) << g.status();
  const PickleValue& root = g->at(g->root());
  ASSERT_EQ(root.kind, Kind::kDict);
  const PickleValue* emb =
      g->DictGet(root, "backbone.embeddings.word_embeddings.weight");
  ASSERT_NE(emb, nullptr);
  ASSERT_EQ(emb->kind, Kind::kTensor);
  EXPECT_EQ(emb->tensor.dtype, ElementType::kF32);
  EXPECT_EQ(emb->tensor.shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(emb->tensor.strides, (std::vector<int64_t>{8, 1}));
  const PickleValue* head = g->DictGet(root, "lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->tensor.storage_key, emb->tensor.storage_key);  // tied
}

TEST(PickleTest, RefusesMalformedStreams) {
  const std::pair<std::string, std::string> cases[] = {
      {""s, "ends without STOP"},
      {"\x80\x02}"s, "ends without STOP"},
      {"\x80\x02X\xff\x00\x00\x00"
       "ab"s,
       "truncated"},
      {"\x80\x02h\x05."s, "memo 5 unset"},
      {"\x80\x02s."s, "underflow"},
      {"\x80\x02\xff."s, "unsupported opcode 0xff"},
      {"\x80\x02N)u."s, "no MARK"},
      {"\x80\x02NN."s, "malformed stack"},
      {"\x80\x02K\x01K\x02"
       "a."s,
       "wrong type"},
      {"\x80\x02(X\x01\x00\x00\x00xtQ."s, "not a torch storage"},
      {"\x80\x09."s, "unknown protocol"},
      {"\x80\x02(X\x07\x00\x00\x00storagectorch\nEvilStorage\n"
       "X\x01\x00\x00\x00"
       "0X\x03\x00\x00\x00"
       "cpuK\x01tQ."s,
       "unsupported storage type torch.EvilStorage"},
  };
  for (const auto& [bytes, message] : cases) {
    absl::StatusOr<PickleGraph> g = UnpickleString(bytes);
    ASSERT_FALSE(g.ok()) << "accepted: " << message;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(g.status().message(), HasSubstr(message));
  }
}

TEST(PickleTest, CyclesAndSharedValuesAreData) {
  // l = []; l.append(l)  -> a list that contains itself.
  absl::StatusOr<PickleGraph> g = UnpickleString(
      "\x80\x02]q\x00h\x00"
      "a."s);
  ASSERT_TRUE(g.ok()) << g.status();
  const PickleValue& root = g->at(g->root());
  ASSERT_EQ(root.kind, Kind::kList);
  ASSERT_EQ(root.items.size(), 1u);
  EXPECT_EQ(root.items[0], g->root());
}

TEST(PickleTest, IntegersAndText) {
  // (BININT -2, LONG1 2^40, BINUNICODE "hé", NEWTRUE)
  std::string s =
      "\x80\x02(J\xfe\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01"
      "X\x03\x00\x00\x00h\xc3\xa9\x88t."s;
  absl::StatusOr<PickleGraph> g = UnpickleString(s);
  ASSERT_TRUE(g.ok()) << g.status();
  const PickleValue& t = g->at(g->root());
  ASSERT_EQ(t.kind, Kind::kTuple);
  ASSERT_EQ(t.items.size(), 4u);
  EXPECT_EQ(g->at(t.items[0]).integer, -2);
  EXPECT_EQ(g->at(t.items[1]).integer, int64_t{1} << 40);
  EXPECT_EQ(g->at(t.items[2]).text, "h\xc3\xa9");
  EXPECT_TRUE(g->at(t.items[3]).boolean);
}

}  // namespace
}  // namespace h3::loader
