// Broken and hostile inputs: each is refused with a message that says what is
// wrong, nothing crashes, nothing is executed, no output is left behind.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/checkpoint.h"
#include "loader/convert.h"
#include "loader/torch_zip.h"
#include "tests/support/temp_path.h"

namespace h3::loader {
namespace {

using ::testing::HasSubstr;

const std::string kTestdata = H3_LOADER_TESTDATA;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const std::string path = h3::testing::TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

absl::Status Convert(const std::string& input) {
  ConvertOptions o;
  o.input = input;
  o.output = h3::testing::TempPath("hostile_out.h3");
  o.hints.n_heads = 2;
  std::filesystem::remove(o.output);
  absl::Status s = ConvertCheckpoint(o, nullptr).status();
  EXPECT_FALSE(std::filesystem::exists(o.output));
  EXPECT_FALSE(std::filesystem::exists(o.output + ".partial"));
  return s;
}

TEST(HostileTest, GlobalsAreNeverCalled) {
  const std::pair<const char*, const char*> cases[] = {
      {"os_system", "call of os.system (not executed)"},
      {"eval", "call of builtins.eval (not executed)"},
      {"subprocess", "call of subprocess.Popen (not executed)"},
      {"nested", "is call of os.system (not executed), not a tensor"},
  };
  for (const auto& [name, message] : cases) {
    const std::string marker = absl::StrCat("/tmp/h3_loader_hostile_", name);
    ::unlink(marker.c_str());
    absl::Status s = Convert(absl::StrCat(kTestdata, "/hostile_", name, ".pt"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(message));
    usleep(100 * 1000);
    EXPECT_FALSE(std::filesystem::exists(marker))
        << "something ran: " << marker;
  }
}

TEST(HostileTest, DamagedArchives) {
  const std::string good = ReadFile(kTestdata + "/model_plain.pt");
  ASSERT_GT(good.size(), 1000u);
  // Truncations: inside the data, inside the central directory, to the header.
  for (size_t keep :
       {good.size() - 10, good.size() / 2, size_t{100}, size_t{3}}) {
    absl::Status s = Convert(WriteTemp("truncated.pt", good.substr(0, keep)));
    EXPECT_FALSE(s.ok()) << "kept " << keep;
    EXPECT_TRUE(s.code() == absl::StatusCode::kDataLoss ||
                s.code() == absl::StatusCode::kInvalidArgument)
        << s;
  }
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_THAT(Convert(WriteTemp("magic.pt", magic)).message(),
              HasSubstr("neither a PyTorch checkpoint"));
  // One flipped byte inside a storage: the entry's CRC catches it.
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x55;
  EXPECT_THAT(Convert(WriteTemp("flipped.pt", flipped)).message(),
              HasSubstr("CRC error"));
  EXPECT_THAT(Convert(WriteTemp("empty.pt", "")).message(),
              HasSubstr("neither"));
  EXPECT_THAT(Convert(WriteTemp("legacy.pt", "\x80\x02}q\x00.")).message(),
              HasSubstr("legacy"));
}

TEST(HostileTest, ShortStorage) {
  absl::Status s = Convert(kTestdata + "/short_storage.pt");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("but the pickle declares"));
}

TEST(HostileTest, ViewPastItsStorage) {
  TensorRef t;
  t.dtype = ElementType::kF32;
  t.shape = {4, 4};
  t.strides = {4, 1};
  t.offset = 1;  // 16 elements from offset 1 need 17
  std::vector<uint8_t> storage(16 * 4), out;
  absl::Status s = GatherStrided(t, storage, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("reaches element 16"));
  t.offset = 0;
  t.strides = {int64_t{1} << 62, 1};  // overflow must not wrap around
  EXPECT_FALSE(GatherStrided(t, storage, &out).ok());
  t.strides = {1, 4};  // transposed view: fine
  EXPECT_TRUE(GatherStrided(t, storage, &out).ok());
}

TEST(HostileTest, WrongShapesMissingTensorsUntiedHead) {
  absl::Status s = Convert(kTestdata + "/bad_shape.pt");
  EXPECT_THAT(s.message(),
              HasSubstr("backbone.layers.0.mixer.q_proj.weight: expected "
                        "shape [8, 8], found [8, 7]"));
  s = Convert(kTestdata + "/missing_tensor.pt");
  EXPECT_THAT(s.message(),
              HasSubstr("missing tensor backbone.layers.1.mlp.fc2.bias "
                        "(expected shape [8])"));
  s = Convert(kTestdata + "/untied_head.pt");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  s = Convert(kTestdata + "/not_a_model.pt");
  EXPECT_THAT(s.message(), HasSubstr("entry 'weights' is list, not a tensor"));
}

TEST(HostileTest, LyingSafetensors) {
  const std::string good = ReadFile(kTestdata + "/model.safetensors");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{uint8_t(good[i])} << (8 * i);
  // Header length pointing past the file, and a huge one.
  for (uint64_t bad : {uint64_t{good.size()}, uint64_t{1} << 62}) {
    std::string s = good;
    for (int i = 0; i < 8; ++i)
      s[i] = static_cast<char>((bad >> (8 * i)) & 0xff);
    // Byte 8 stays '{', so it is recognised as safetensors and refused.
    EXPECT_EQ(Convert(WriteTemp("lying.safetensors", s)).code(),
              absl::StatusCode::kDataLoss);
  }
  // Data section cut short: offsets now lie past the end.
  absl::Status s =
      Convert(WriteTemp("cut.safetensors", good.substr(0, 8 + n + 100)));
  EXPECT_THAT(s.message(), HasSubstr("lie outside"));
}

}  // namespace
}  // namespace h3::loader
