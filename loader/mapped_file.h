#ifndef H3_LOADER_MAPPED_FILE_H_
#define H3_LOADER_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace h3::loader {

// A whole file mapped read-only into memory. Checkpoints and model files are
// read through it, so that weights are paged in on demand and shared between
// processes instead of copied.
//
// Thread-safe: the contents never change after Open. The mapping lives as long
// as the object; spans taken from data() must not outlive it.
class MappedFile {
 public:
  // Maps `path`. NotFound if it does not exist, PermissionDenied if it cannot
  // be read, FailedPrecondition if it is not a regular file. An empty file
  // maps to an empty span.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(
      const std::string& path);
  // A view of `bytes` that outlive the object (a model file embedded in the
  // binary), read as a file called `name`; nothing is unmapped.
  static std::unique_ptr<MappedFile> Wrap(std::string name,
                                          absl::Span<const uint8_t> bytes);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  absl::Span<const uint8_t> data() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size, bool mapped)
      : path_(std::move(path)), data_(data), size_(size), mapped_(mapped) {}

  std::string path_;
  const uint8_t* data_;  // nullptr when size_ == 0
  size_t size_;
  bool mapped_;  // false for Wrap
};

// The whole contents of `path`, copied out of a MappedFile (same errors).
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace h3::loader

#endif  // H3_LOADER_MAPPED_FILE_H_
