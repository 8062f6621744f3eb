#include "loader/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/torch_zip.h"
#include "nlohmann/json.hpp"

namespace h3::loader {
namespace {

using nlohmann::json;

constexpr int kMaxJsonDepth = 32;

absl::Status HeaderError(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("safetensors header: ", what));
}

// nlohmann's parser copes with deep nesting, but values that deep are never
// a valid header; refusing them early bounds the work.
bool NestingWithin(absl::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& name,
                                            const json& v, uint64_t data_size) {
  auto bad = [&](absl::string_view what) {
    return HeaderError(absl::StrCat("tensor '", name, "': ", what));
  };
  if (!v.is_object()) return bad("entry is not an object");
  SafetensorsEntry e;
  e.name = name;
  auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string()) return bad("no dtype");
  absl::StatusOr<ElementType> dt =
      DTypeFromName(dtype->get_ref<const std::string&>());
  if (!dt.ok()) return bad(dt.status().message());
  e.dtype = *dt;
  auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array()) return bad("no shape");
  for (const json& d : *shape) {
    if (!d.is_number_unsigned())
      return bad("shape has a negative or non-integer size");
    const uint64_t size = d.get<uint64_t>();
    if (size > (uint64_t{1} << 48)) return bad("shape too large");
    e.shape.push_back(static_cast<int64_t>(size));
  }
  auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    return bad("data_offsets is not two non-negative integers");
  }
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size) {
    return bad(absl::StrCat("data_offsets [", e.begin, ", ", e.end,
                            "] lie outside the ", data_size, " bytes of data"));
  }
  absl::StatusOr<uint64_t> numel = NumElements(e.shape);
  if (!numel.ok()) return bad(numel.status().message());
  if (*numel * ElementSize(e.dtype) != e.end - e.begin) {
    return bad(absl::StrCat("shape and dtype need ",
                            *numel * ElementSize(e.dtype),
                            " bytes but offsets give ", e.end - e.begin));
  }
  return e;
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    absl::Span<const uint8_t> prefix, uint64_t file_size) {
  if (file_size < 8 || prefix.size() < 8) {
    return HeaderError("file shorter than the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{prefix[i]} << (8 * i);
  if (n > kMaxSafetensorsHeader) {
    return HeaderError(absl::StrCat("header length ", n, " exceeds the ",
                                    kMaxSafetensorsHeader, "-byte limit"));
  }
  if (n > file_size - 8 || n > prefix.size() - 8) {
    return HeaderError(
        absl::StrCat("header length ", n, " runs past the end of the file"));
  }
  absl::string_view text(reinterpret_cast<const char*>(prefix.data() + 8), n);
  if (text.empty() || text.front() != '{') {
    return HeaderError("header is not a JSON object");
  }
  if (!NestingWithin(text, kMaxJsonDepth)) {
    return HeaderError("header JSON is nested too deeply");
  }
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return HeaderError("header is not valid JSON");
  }
  SafetensorsHeader header;
  header.data_start = 8 + n;
  const uint64_t data_size = file_size - header.data_start;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return HeaderError("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return HeaderError(absl::StrCat("__metadata__ value of '", m.key(),
                                          "' is not a string"));
        }
        header.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    H3_ASSIGN_OR_RETURN(SafetensorsEntry e,
                        ParseEntry(it.key(), *it, data_size));
    header.tensors.push_back(std::move(e));
  }
  // No two tensors may share bytes.
  std::vector<const SafetensorsEntry*> sorted;
  for (const SafetensorsEntry& e : header.tensors) {
    if (e.end > e.begin) sorted.push_back(&e);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->begin < sorted[i - 1]->end) {
      return HeaderError(absl::StrCat("tensors '", sorted[i - 1]->name,
                                      "' and '", sorted[i]->name, "' overlap"));
    }
  }
  return header;
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<MappedFile> file,
                                 SafetensorsHeader header)
    : file_(std::move(file)), header_(std::move(header)) {
  for (size_t i = 0; i < header_.tensors.size(); ++i) {
    index_[header_.tensors[i].name] = i;
  }
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  H3_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  return Open(std::move(file));
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    std::unique_ptr<MappedFile> file) {
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(file->data(), file->size());
  if (!header.ok()) {
    return absl::DataLossError(
        absl::StrCat(file->path(), ": ", header.status().message()));
  }
  return std::unique_ptr<SafetensorsFile>(
      new SafetensorsFile(std::move(file), *std::move(header)));
}

const SafetensorsEntry* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

absl::StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, std::vector<Tensor> tensors,
    const std::map<std::string, std::string>& metadata, uint64_t alignment) {
  if (alignment < 8 || alignment > 4096 || (alignment & (alignment - 1))) {
    return absl::InvalidArgumentError(
        "alignment must be a power of two in [8, 4096]");
  }
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  std::set<std::string> names;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;  // within the data section
  int padding = 0;
  for (Tensor& t : tensors) {
    if (!names.insert(t.name).second || t.name == "__metadata__" ||
        absl::StartsWith(t.name, kPaddingPrefix)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "safetensors: invalid or duplicate tensor name '", t.name, "'"));
    }
    H3_ASSIGN_OR_RETURN(uint64_t numel, NumElements(t.shape));
    const uint64_t aligned = (offset + alignment - 1) / alignment * alignment;
    if (aligned != offset) {
      const std::string pad = absl::StrCat(kPaddingPrefix, padding++);
      header[pad] = {
          {"dtype", "U8"},
          {"shape", nlohmann::ordered_json::array({aligned - offset})},
          {"data_offsets", nlohmann::ordered_json::array({offset, aligned})}};
      offset = aligned;
    }
    const uint64_t size = numel * ElementSize(t.dtype);
    header[t.name] = {{"dtype", DTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets",
                       nlohmann::ordered_json::array({offset, offset + size})}};
    w->offsets_.push_back(offset);
    offset += size;
  }
  std::string text = header.dump();
  const uint64_t start =
      (8 + text.size() + alignment - 1) / alignment * alignment;
  text.append(start - 8 - text.size(), ' ');
  for (uint64_t& o : w->offsets_) o += start;
  w->path_ = path;
  w->partial_path_ = path + ".partial";
  w->tensors_ = std::move(tensors);
  w->file_size_ = start + offset;
  w->out_ = std::fopen(w->partial_path_.c_str(), "wb");
  if (w->out_ == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create ", w->partial_path_, ": ", std::strerror(errno)));
  }
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = (text.size() >> (8 * i)) & 0xff;
  H3_RETURN_IF_ERROR(w->WriteRaw(length, 8));
  H3_RETURN_IF_ERROR(w->WriteRaw(text.data(), text.size()));
  return w;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (out_ != nullptr) std::fclose(out_);
  if (!finished_ && !partial_path_.empty()) std::remove(partial_path_.c_str());
}

absl::Status SafetensorsWriter::WriteRaw(const void* data, size_t size) {
  if (size > 0 && std::fwrite(data, 1, size, out_) != size) {
    return absl::InternalError(absl::StrCat("cannot write ", partial_path_,
                                            ": ", std::strerror(errno)));
  }
  written_ += size;
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::PadTo(uint64_t offset) {
  static const uint8_t kZeros[4096] = {};
  while (written_ < offset) {
    H3_RETURN_IF_ERROR(
        WriteRaw(kZeros, std::min<uint64_t>(sizeof kZeros, offset - written_)));
  }
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Append(absl::Span<const uint8_t> bytes) {
  if (next_ >= tensors_.size()) {
    return absl::InvalidArgumentError("safetensors: every tensor was written");
  }
  const Tensor& t = tensors_[next_];
  H3_ASSIGN_OR_RETURN(uint64_t numel, NumElements(t.shape));
  if (bytes.size() != numel * ElementSize(t.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "safetensors: tensor '", t.name, "' needs ",
        numel * ElementSize(t.dtype), " bytes, got ", bytes.size()));
  }
  H3_RETURN_IF_ERROR(PadTo(offsets_[next_]));
  H3_RETURN_IF_ERROR(WriteRaw(bytes.data(), bytes.size()));
  ++next_;
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Finish() {
  if (next_ != tensors_.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "safetensors: ", tensors_.size() - next_, " tensors not written"));
  }
  const bool closed = std::fclose(out_) == 0;
  out_ = nullptr;
  if (!closed) {
    return absl::InternalError(absl::StrCat("cannot write ", partial_path_,
                                            ": ", std::strerror(errno)));
  }
  if (std::rename(partial_path_.c_str(), path_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", partial_path_,
                                            " to ", path_, ": ",
                                            std::strerror(errno)));
  }
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace h3::loader
