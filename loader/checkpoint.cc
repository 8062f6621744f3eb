#include "loader/checkpoint.h"

#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace h3::loader {
namespace {

using Kind = PickleValue::Kind;

std::string PrefixMapped(std::string name) {
  struct Rule {
    absl::string_view from, to;
  };
  // Applied in order, each to the result of the previous, as in the
  // reference's key_mapping_backbone.
  static constexpr Rule kRules[] = {
      {"s4seq.encoder.", "backbone."},
      {"embedding.", "backbone.embeddings.word_embeddings."},
      {"backbone.norm", "backbone.ln_f"},
  };
  for (const Rule& r : kRules) {
    if (absl::StartsWith(name, r.from)) {
      name = absl::StrCat(r.to, name.substr(r.from.size()));
    }
  }
  return name;
}

std::string Norm(int64_t layer, int which, absl::string_view param) {
  return LayerTensorName(layer, absl::StrCat("norm", which, ".", param));
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> CanonicalNames(
    const std::vector<std::string>& names) {
  std::map<std::string, std::string> mapped;  // mapped -> source
  for (const std::string& source : names) {
    std::string name = PrefixMapped(source);
    if (!mapped.emplace(name, source).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensors ", mapped[name], " and ", source, " both map to ", name));
    }
  }
  if (!mapped.contains("backbone.ln_0.weight")) return mapped;

  int64_t n_layer = 0;
  for (const auto& [name, source] : mapped) {
    absl::string_view rest = name;
    int64_t i;
    if (absl::ConsumePrefix(&rest, "backbone.layers.") &&
        absl::SimpleAtoi(rest.substr(0, rest.find('.')), &i) && i >= 0 &&
        i < (int64_t{1} << 24)) {
      n_layer = std::max(n_layer, i + 1);
    }
  }
  std::map<std::string, std::string> out = mapped;
  auto take = [&](const std::string& from) -> absl::StatusOr<std::string> {
    auto it = mapped.find(from);
    if (it == mapped.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "old-layout checkpoint (has backbone.ln_0) lacks ", from));
    }
    out.erase(from);
    return it->second;
  };
  std::map<std::string, std::string> moved;  // new name -> source
  for (absl::string_view p : {"weight", "bias"}) {
    H3_ASSIGN_OR_RETURN(moved[absl::StrCat("backbone.ln_f.", p)],
                        take(Norm(n_layer - 1, 2, p)));
    for (int64_t l = 0; l < n_layer; ++l) {
      H3_ASSIGN_OR_RETURN(moved[Norm(l, 2, p)], take(Norm(l, 1, p)));
      if (l > 0) {
        H3_ASSIGN_OR_RETURN(moved[Norm(l, 1, p)], take(Norm(l - 1, 2, p)));
      }
    }
    H3_ASSIGN_OR_RETURN(moved[Norm(0, 1, p)],
                        take(absl::StrCat("backbone.ln_0.", p)));
  }
  for (auto& [name, source] : moved) out[name] = source;
  return out;
}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(
    const std::string& path) {
  std::unique_ptr<Checkpoint> c(new Checkpoint());
  c->path_ = path;
  H3_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> probe,
                      MappedFile::Open(path));
  // The first 9 bytes tell the format; copied before the probe is unmapped.
  const absl::Span<const uint8_t> first =
      probe->data().first(std::min<size_t>(probe->size(), 9));
  const std::vector<uint8_t> head(first.begin(), first.end());
  c->file_size_ = probe->size();
  probe.reset();
  if ((head.size() >= 4 && std::memcmp(head.data(), "PK\x03\x04", 4) == 0) ||
      (head.size() >= 2 && head[0] == 0x80 && head[1] <= 5)) {
    c->format_ = Format::kTorchZip;
    H3_RETURN_IF_ERROR(c->LoadTorch());
  } else if (head.size() >= 9 && head[8] == '{') {
    c->format_ = Format::kSafetensors;
    H3_RETURN_IF_ERROR(c->LoadSafetensors());
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     " is neither a PyTorch checkpoint (torch.save zip) nor a "
                     "safetensors file"));
  }
  return c;
}

absl::Status Checkpoint::LoadTorch() {
  H3_ASSIGN_OR_RETURN(torch_, TorchArchive::Open(path_));
  const PickleGraph& g = torch_->graph();
  const PickleValue& root = g.at(g.root());
  auto refuse = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": not a model checkpoint: ", what));
  };
  if (root.kind != Kind::kDict) {
    return refuse(absl::StrCat("the top-level object is ", g.Describe(root),
                               ", not a dict"));
  }
  const PickleValue* sd = &root;
  const PickleValue* nested = g.DictGet(root, "state_dict");
  if (g.DictGet(root, "pytorch-lightning_version") != nullptr ||
      (nested != nullptr && nested->kind == Kind::kDict)) {
    if (nested == nullptr || nested->kind != Kind::kDict) {
      return refuse("Lightning checkpoint without a state_dict dict");
    }
    lightning_ = true;
    sd = nested;
  }
  std::map<std::string, Tensor> by_source;
  for (const auto& [k, v] : sd->entries) {
    const PickleValue& key = g.at(k);
    const PickleValue& value = g.at(v);
    if (key.kind != Kind::kString) {
      return refuse(absl::StrCat("a state_dict key is ", g.Describe(key)));
    }
    std::string name = key.text;
    if (lightning_) {
      if (!absl::StartsWith(name, "model.")) continue;  // not the model
      name = name.substr(6);
    }
    if (value.kind != Kind::kTensor) {
      return refuse(absl::StrCat("state_dict entry '", key.text, "' is ",
                                 g.Describe(value), ", not a tensor"));
    }
    torch_refs_[name] = value.tensor;
    by_source[name] = Tensor{value.tensor.dtype, value.tensor.shape, name};
  }
  return Canonicalise(std::move(by_source));
}

absl::Status Checkpoint::LoadSafetensors() {
  H3_ASSIGN_OR_RETURN(safetensors_, SafetensorsFile::Open(path_));
  std::map<std::string, Tensor> by_source;
  for (const SafetensorsEntry& e : safetensors_->header().tensors) {
    if (absl::StartsWith(e.name, SafetensorsWriter::kPaddingPrefix)) continue;
    by_source[e.name] = Tensor{e.dtype, e.shape, e.name};
  }
  return Canonicalise(std::move(by_source));
}

absl::Status Checkpoint::Canonicalise(std::map<std::string, Tensor> by_source) {
  std::vector<std::string> names;
  bool all_model_prefixed = !by_source.empty();
  for (const auto& [name, t] : by_source) {
    names.push_back(name);
    if (!absl::StartsWith(name, "model.")) all_model_prefixed = false;
  }
  // A safetensors export of a Lightning module keeps the `model.` prefix.
  if (format_ == Format::kSafetensors && all_model_prefixed) {
    lightning_ = true;
    for (std::string& n : names) n = n.substr(6);
  }
  absl::StatusOr<std::map<std::string, std::string>> canonical =
      CanonicalNames(names);
  if (!canonical.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", canonical.status().message()));
  }
  for (const auto& [name, source] : *canonical) {
    if (name != source) old_names_ = true;
    const std::string file_name = lightning_ && format_ == Format::kSafetensors
                                      ? "model." + source
                                      : source;
    Tensor t = by_source.at(file_name);
    tensors_[name] = std::move(t);
  }
  return absl::OkStatus();
}

ShapeMap Checkpoint::shapes() const {
  ShapeMap out;
  for (const auto& [name, t] : tensors_) out[name] = t.shape;
  return out;
}

absl::Status Checkpoint::Read(const std::string& name,
                              std::vector<uint8_t>* out) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor ", name));
  }
  const std::string& source = it->second.source_name;
  if (torch_ != nullptr) {
    return torch_->ReadTensor(torch_refs_.at(source), out);
  }
  const SafetensorsEntry* e = safetensors_->Find(source);
  absl::Span<const uint8_t> bytes = safetensors_->Bytes(*e);
  out->assign(bytes.begin(), bytes.end());
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const uint8_t>> Checkpoint::View(
    const std::string& name, std::vector<uint8_t>* scratch) {
  auto it = tensors_.find(name);
  if (it != tensors_.end() && safetensors_ != nullptr) {
    return safetensors_->Bytes(*safetensors_->Find(it->second.source_name));
  }
  H3_RETURN_IF_ERROR(Read(name, scratch));
  return absl::MakeConstSpan(*scratch);
}

bool Checkpoint::SameData(const std::string& a, const std::string& b) const {
  auto ia = tensors_.find(a);
  auto ib = tensors_.find(b);
  if (ia == tensors_.end() || ib == tensors_.end()) return false;
  const std::string& sa = ia->second.source_name;
  const std::string& sb = ib->second.source_name;
  if (torch_ != nullptr) {
    const TensorRef& ra = torch_refs_.at(sa);
    const TensorRef& rb = torch_refs_.at(sb);
    return ra.storage_key == rb.storage_key && ra.offset == rb.offset &&
           ra.shape == rb.shape && ra.strides == rb.strides &&
           ra.dtype == rb.dtype;
  }
  const SafetensorsEntry* ea = safetensors_->Find(sa);
  const SafetensorsEntry* eb = safetensors_->Find(sb);
  return ea->begin == eb->begin && ea->end == eb->end;
}

}  // namespace h3::loader
