#ifndef H3_LOADER_SAFETENSORS_H_
#define H3_LOADER_SAFETENSORS_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "loader/dtype.h"
#include "loader/mapped_file.h"

namespace h3::loader {

// The safetensors format (Hugging Face): an 8-byte little-endian header
// length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets":
// [begin, end]}, ..., "__metadata__": {string: string}}, then the data; each
// offset is relative to the start of the data.

// Header limit, as in the reference implementation.
inline constexpr uint64_t kMaxSafetensorsHeader = 100 << 20;

struct SafetensorsEntry {
  std::string name;
  ElementType dtype = ElementType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets within the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // in the header's order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // file offset of the data section
};

// Parses and checks the header of a safetensors file of `file_size` bytes
// whose first bytes are `prefix` (at least the whole header). DataLoss, with
// the tensor's name where there is one, for: a file shorter than 8 bytes, a
// header longer than the file or than kMaxSafetensorsHeader, invalid JSON,
// unknown dtypes, negative or overflowing shapes, offsets past the data, a
// byte range that does not match shape x dtype, overlapping tensors, or
// metadata that is not string to string.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    absl::Span<const uint8_t> prefix, uint64_t file_size);

// A safetensors file mapped read-only; tensor bytes are views of the mapping.
// Thread-safe after Open; views live as long as the object.
class SafetensorsFile {
 public:
  // NotFound etc. from MappedFile; DataLoss from ParseSafetensorsHeader,
  // prefixed with the path.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path);
  // The same over an open file (DataLoss prefixed with its path()).
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      std::unique_ptr<MappedFile> file);

  const SafetensorsHeader& header() const { return header_; }
  const std::string& path() const { return file_->path(); }

  // The entry called `name`, or nullptr.
  const SafetensorsEntry* Find(const std::string& name) const;

  // The bytes of `entry` (one of header().tensors).
  absl::Span<const uint8_t> Bytes(const SafetensorsEntry& entry) const {
    return file_->data().subspan(header_.data_start + entry.begin,
                                 entry.end - entry.begin);
  }

 private:
  SafetensorsFile(std::unique_ptr<MappedFile> file, SafetensorsHeader header);

  std::unique_ptr<MappedFile> file_;
  SafetensorsHeader header_;
  std::map<std::string, size_t> index_;
};

// Writes a safetensors file whose every tensor starts at a multiple of
// `alignment` bytes from the start of the file, so that a mapping of the file
// can serve tensors in place. The header is padded with spaces (the format
// allows trailing whitespace); gaps between tensors are covered by 1-D U8
// tensors named kPaddingPrefix + number, because the format requires the
// tensors to tile the data section exactly.
//
// Usage: Create() with every tensor's name, dtype and shape (in file order),
// then Append() each tensor's bytes in that order, then Finish(). The file is
// written as `path` + ".partial" and renamed onto `path` by Finish(); a writer
// destroyed before Finish() removes the partial file. Not thread-safe.
class SafetensorsWriter {
 public:
  static constexpr absl::string_view kPaddingPrefix = "__padding__.";

  struct Tensor {
    std::string name;
    ElementType dtype = ElementType::kF32;
    std::vector<int64_t> shape;
  };

  // InvalidArgument for duplicate names, names starting with kPaddingPrefix
  // or "__metadata__", or an alignment that is not a power of two in
  // [8, 4096]; an I/O error status if the file cannot be created.
  static absl::StatusOr<std::unique_ptr<SafetensorsWriter>> Create(
      const std::string& path, std::vector<Tensor> tensors,
      const std::map<std::string, std::string>& metadata,
      uint64_t alignment = 64);

  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends the next tensor's bytes. InvalidArgument if `bytes` does not have
  // that tensor's size or every tensor was already written.
  absl::Status Append(absl::Span<const uint8_t> bytes);

  // Flushes, checks that every tensor was written, and renames the file into
  // place.
  absl::Status Finish();

  // Total size of the file being written.
  uint64_t file_size() const { return file_size_; }

 private:
  SafetensorsWriter() = default;
  absl::Status WriteRaw(const void* data, size_t size);
  absl::Status PadTo(uint64_t offset);

  std::string path_;
  std::string partial_path_;
  std::FILE* out_ = nullptr;
  std::vector<Tensor> tensors_;
  std::vector<uint64_t> offsets_;  // file offsets of tensors_
  size_t next_ = 0;
  uint64_t written_ = 0;  // bytes written so far
  uint64_t file_size_ = 0;
  bool finished_ = false;
};

}  // namespace h3::loader

#endif  // H3_LOADER_SAFETENSORS_H_
