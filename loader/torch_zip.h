#ifndef H3_LOADER_TORCH_ZIP_H_
#define H3_LOADER_TORCH_ZIP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/mapped_file.h"
#include "loader/pickle.h"

struct zip;

namespace h3::loader {

// A checkpoint written by `torch.save` (PyTorch >= 1.6): a zip archive with
// <name>/data.pkl (the object, a pickle) and <name>/data/<key> (one entry per
// storage, raw little-endian elements). Reads the archive with libzip (entry
// CRCs are checked) over a read-only mapping of the file.
//
// Not thread-safe: ReadTensor reuses one libzip handle.
class TorchArchive {
 public:
  // Opens `path` and unpickles its data.pkl. DataLoss for a file that is not
  // a zip archive, a truncated or inconsistent one, an archive without
  // data.pkl, a big-endian archive, or a malformed pickle. The legacy
  // (pre-1.6) torch.save format is refused with InvalidArgument.
  static absl::StatusOr<std::unique_ptr<TorchArchive>> Open(
      const std::string& path);

  ~TorchArchive();
  TorchArchive(const TorchArchive&) = delete;
  TorchArchive& operator=(const TorchArchive&) = delete;

  // The unpickled object; its tensors are PickleValue::Kind::kTensor values.
  const PickleGraph& graph() const { return graph_; }

  // Copies the elements of `tensor` into `out` (resized), row-major and
  // contiguous, whatever its strides and offset. DataLoss when the storage
  // entry is missing, shorter than the storage the pickle declares, or too
  // short for the tensor's offset, shape and strides.
  absl::Status ReadTensor(const TensorRef& tensor, std::vector<uint8_t>* out);

  // Bytes of the archive on disk.
  uint64_t file_size() const { return file_->size(); }

 private:
  TorchArchive(std::unique_ptr<MappedFile> file, zip* archive)
      : file_(std::move(file)), archive_(archive) {}

  absl::StatusOr<std::vector<uint8_t>> ReadEntry(const std::string& name,
                                                 uint64_t max_size);
  absl::Status ReadEntryInto(const std::string& name, uint8_t* dst,
                             uint64_t size);

  std::unique_ptr<MappedFile> file_;
  zip* archive_;
  std::string prefix_;  // "<name>/"
  PickleGraph graph_;
  // The last storage read, so views of one storage read it once.
  std::string cached_key_;
  std::vector<uint8_t> cached_storage_;
};

// Bytes, strides and offset of a strided view, checked against a storage of
// `storage_numel` elements: copies the view's elements row-major into `out`.
// DataLoss if the view reaches past the storage or its sizes overflow.
absl::Status GatherStrided(const TensorRef& tensor,
                           absl::Span<const uint8_t> storage,
                           std::vector<uint8_t>* out);

// Number of elements of `shape`; DataLoss on overflow past 2^48.
absl::StatusOr<uint64_t> NumElements(absl::Span<const int64_t> shape);

}  // namespace h3::loader

#endif  // H3_LOADER_TORCH_ZIP_H_
