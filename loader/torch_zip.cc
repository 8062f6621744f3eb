#include "loader/torch_zip.h"

#include <zip.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace h3::loader {
namespace {

constexpr uint64_t kMaxElements = uint64_t{1} << 48;
constexpr uint64_t kMaxPickleBytes = uint64_t{1} << 30;

std::string ZipError(zip_error_t* error) { return zip_error_strerror(error); }

}  // namespace

absl::StatusOr<uint64_t> NumElements(absl::Span<const int64_t> shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return absl::DataLossError("negative dimension");
    if (d != 0 && n > kMaxElements / static_cast<uint64_t>(d)) {
      return absl::DataLossError("tensor has too many elements");
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

absl::Status GatherStrided(const TensorRef& t,
                           absl::Span<const uint8_t> storage,
                           std::vector<uint8_t>* out) {
  const size_t esize = ElementSize(t.dtype);
  H3_ASSIGN_OR_RETURN(uint64_t numel, NumElements(t.shape));
  if (t.shape.size() != t.strides.size()) {
    return absl::DataLossError("tensor size and stride differ in length");
  }
  const uint64_t storage_numel = storage.size() / esize;
  out->resize(numel * esize);
  if (numel == 0) return absl::OkStatus();
  // Highest element index the view touches, computed without overflow.
  unsigned __int128 last = static_cast<uint64_t>(t.offset);
  for (size_t i = 0; i < t.shape.size(); ++i) {
    last += static_cast<unsigned __int128>(t.shape[i] - 1) *
            static_cast<uint64_t>(t.strides[i]);
  }
  if (last >= storage_numel) {
    return absl::DataLossError(
        absl::StrCat("tensor of ", numel, " elements at offset ", t.offset,
                     " reaches element ", static_cast<uint64_t>(last),
                     " of a storage that holds ", storage_numel));
  }
  // Contiguous row-major: one copy.
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expect) contiguous = false;
    expect *= t.shape[i];
  }
  const uint8_t* base = storage.data() + t.offset * esize;
  if (contiguous) {
    std::memcpy(out->data(), base, numel * esize);
    return absl::OkStatus();
  }
  // General strided view: walk the index odometer.
  const size_t rank = t.shape.size();
  std::vector<int64_t> index(rank, 0);
  uint64_t src = 0;  // element offset from base
  uint8_t* dst = out->data();
  for (uint64_t n = 0; n < numel; ++n) {
    std::memcpy(dst + n * esize, base + src * esize, esize);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < t.shape[d]) {
        src += t.strides[d];
        break;
      }
      src -= (t.shape[d] - 1) * t.strides[d];
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TorchArchive>> TorchArchive::Open(
    const std::string& path) {
  H3_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  absl::Span<const uint8_t> data = file->data();
  if (data.size() >= 2 && data[0] == 0x80 && data[1] <= 5) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " is in the legacy (pre-1.6) torch.save format; re-save it "
        "with a current PyTorch"));
  }
  if (data.size() < 4 || std::memcmp(data.data(), "PK\x03\x04", 4) != 0) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a PyTorch checkpoint (no zip header)"));
  }
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source =
      zip_source_buffer_create(data.data(), data.size(), 0, &error);
  if (source == nullptr) {
    std::string message = ZipError(&error);
    zip_error_fini(&error);
    return absl::InternalError(absl::StrCat(path, ": ", message));
  }
  zip_t* archive =
      zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
  if (archive == nullptr) {
    std::string message = ZipError(&error);
    zip_error_fini(&error);
    zip_source_free(source);
    return absl::DataLossError(
        absl::StrCat(path, ": damaged zip archive: ", message));
  }
  zip_error_fini(&error);
  std::unique_ptr<TorchArchive> result(
      new TorchArchive(std::move(file), archive));

  // The archive's top folder is arbitrary (the file's stem, or "archive").
  const zip_int64_t n = zip_get_num_entries(archive, 0);
  std::string pickle_name;
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(archive, i, 0);
    if (name == nullptr) continue;
    absl::string_view s(name);
    size_t slash = s.find('/');
    if (slash != absl::string_view::npos && s.substr(slash) == "/data.pkl") {
      pickle_name = std::string(s);
      result->prefix_ = std::string(s.substr(0, slash + 1));
      break;
    }
  }
  if (pickle_name.empty()) {
    return absl::DataLossError(absl::StrCat(
        path, ": zip archive without data.pkl: not a torch.save checkpoint"));
  }
  zip_int64_t order =
      zip_name_locate(archive, (result->prefix_ + "byteorder").c_str(), 0);
  if (order >= 0) {
    H3_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                        result->ReadEntry(result->prefix_ + "byteorder", 16));
    if (std::string(bytes.begin(), bytes.end()) != "little") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": big-endian checkpoints are not supported"));
    }
  }
  H3_ASSIGN_OR_RETURN(std::vector<uint8_t> pickle,
                      result->ReadEntry(pickle_name, kMaxPickleBytes));
  absl::StatusOr<PickleGraph> graph = Unpickle(pickle);
  if (!graph.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", graph.status().message()));
  }
  result->graph_ = *std::move(graph);
  return result;
}

TorchArchive::~TorchArchive() { zip_discard(archive_); }

absl::Status TorchArchive::ReadEntryInto(const std::string& name, uint8_t* dst,
                                         uint64_t size) {
  zip_file_t* f = zip_fopen(archive_, name.c_str(), 0);
  if (f == nullptr) {
    return absl::DataLossError(absl::StrCat(file_->path(),
                                            ": cannot open entry ", name, ": ",
                                            zip_strerror(archive_)));
  }
  uint64_t done = 0;
  absl::Status status;
  while (done < size) {
    zip_int64_t got = zip_fread(f, dst + done, size - done);
    if (got <= 0) {
      status = absl::DataLossError(absl::StrCat(
          file_->path(), ": entry ", name,
          " is damaged: ", got < 0 ? zip_file_strerror(f) : "ends early"));
      break;
    }
    done += static_cast<uint64_t>(got);
  }
  if (status.ok()) {
    // libzip compares the entry's CRC-32 when a read reaches the end: ask for
    // one byte more, which must find the end and a matching checksum.
    uint8_t extra;
    zip_int64_t got = zip_fread(f, &extra, 1);
    if (got != 0) {
      status = absl::DataLossError(absl::StrCat(
          file_->path(), ": entry ", name, " is damaged: ",
          got < 0 ? zip_file_strerror(f) : "longer than its size"));
    }
  }
  zip_fclose(f);
  return status;
}

absl::StatusOr<std::vector<uint8_t>> TorchArchive::ReadEntry(
    const std::string& name, uint64_t max_size) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(archive_, name.c_str(), 0, &st) != 0 ||
      !(st.valid & ZIP_STAT_SIZE)) {
    return absl::DataLossError(
        absl::StrCat(file_->path(), ": archive has no entry ", name));
  }
  if (st.size > max_size) {
    return absl::DataLossError(absl::StrCat(file_->path(), ": entry ", name,
                                            " is too large (", st.size,
                                            " bytes)"));
  }
  std::vector<uint8_t> bytes(st.size);
  H3_RETURN_IF_ERROR(ReadEntryInto(name, bytes.data(), st.size));
  return bytes;
}

absl::Status TorchArchive::ReadTensor(const TensorRef& tensor,
                                      std::vector<uint8_t>* out) {
  const std::string name = absl::StrCat(prefix_, "data/", tensor.storage_key);
  const size_t esize = ElementSize(tensor.dtype);
  if (tensor.storage_numel > kMaxElements) {
    return absl::DataLossError(absl::StrCat(
        file_->path(), ": storage ", tensor.storage_key, " is too large"));
  }
  const uint64_t declared = tensor.storage_numel * esize;
  absl::StatusOr<uint64_t> numel = NumElements(tensor.shape);
  if (!numel.ok()) return numel.status();
  bool contiguous = tensor.shape.size() == tensor.strides.size();
  int64_t expect = 1;
  for (size_t i = tensor.shape.size(); contiguous && i-- > 0;) {
    if (tensor.shape[i] != 1 && tensor.strides[i] != expect) contiguous = false;
    expect *= tensor.shape[i];
  }
  // The common case, a tensor that is its whole storage: read it straight
  // into `out`, with no intermediate copy.
  zip_stat_t st;
  zip_stat_init(&st);
  if (contiguous && tensor.offset == 0 && declared > 0 &&
      *numel * esize == declared &&
      zip_stat(archive_, name.c_str(), 0, &st) == 0 &&
      (st.valid & ZIP_STAT_SIZE) && st.size == declared) {
    out->resize(declared);
    return ReadEntryInto(name, out->data(), declared);
  }
  if (cached_key_ != tensor.storage_key) {
    cached_key_.clear();
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadEntry(name, kMaxElements);
    if (!bytes.ok()) return bytes.status();
    if (bytes->size() < declared) {
      return absl::DataLossError(absl::StrCat(
          file_->path(), ": storage ", tensor.storage_key, " holds ",
          bytes->size(), " bytes, but the pickle declares ", declared));
    }
    cached_storage_ = *std::move(bytes);
    cached_key_ = tensor.storage_key;
  }
  absl::Status status = GatherStrided(
      tensor, absl::MakeConstSpan(cached_storage_).first(declared), out);
  if (!status.ok()) {
    return absl::DataLossError(absl::StrCat(file_->path(), ": storage ",
                                            tensor.storage_key, ": ",
                                            status.message()));
  }
  return absl::OkStatus();
}

}  // namespace h3::loader
