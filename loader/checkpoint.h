#ifndef H3_LOADER_CHECKPOINT_H_
#define H3_LOADER_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/config.h"
#include "loader/dtype.h"
#include "loader/pickle.h"
#include "loader/safetensors.h"
#include "loader/torch_zip.h"

namespace h3::loader {

// Maps the tensor names of a state_dict to the canonical (layout 1) names,
// exactly as the reference SSMLMHeadModel.load_state_dict does: prefixes
// `s4seq.encoder.` -> `backbone.`, `embedding.` -> `backbone.embeddings.
// word_embeddings.`, `backbone.norm` -> `backbone.ln_f`; and, when
// `backbone.ln_0.weight` exists (old block order), every layer norm moves
// one position: norm1[0] <- ln_0, norm1[l] <- norm2[l-1], norm2[l] <- norm1[l],
// ln_f <- norm2[n_layer-1] (an old `norm`/`ln_f` is superseded, as there).
// Returns canonical name -> source name. InvalidArgument if two names map to
// one, or a norm that the shift needs is missing.
absl::StatusOr<std::map<std::string, std::string>> CanonicalNames(
    const std::vector<std::string>& names);

// A checkpoint to convert: a torch.save zip (a plain state_dict or a PyTorch
// Lightning checkpoint, in new or old naming) or a safetensors file, with its
// tensors under canonical names. Not thread-safe.
class Checkpoint {
 public:
  enum class Format { kTorchZip, kSafetensors };

  struct Tensor {
    ElementType dtype = ElementType::kF32;
    std::vector<int64_t> shape;
    std::string source_name;  // the name in the file
  };

  // Opens `path`, recognising the format by its first bytes. DataLoss or
  // InvalidArgument, naming the file, for anything else, for a damaged file,
  // for a pickle whose top level is not a dict (e.g. a call of a global such
  // as os.system, which is never executed), or for a state_dict entry that is
  // not a tensor.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(
      const std::string& path);

  Format format() const { return format_; }
  bool lightning() const { return lightning_; }  // state_dict under model.
  bool old_names() const { return old_names_; }  // s4seq.encoder / ln_0
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }

  // Canonical name -> tensor.
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  ShapeMap shapes() const;

  // Copies the tensor called `name` (canonical) into `out` as contiguous
  // little-endian elements of its dtype. NotFound for an unknown name;
  // DataLoss when its bytes are missing or too short.
  absl::Status Read(const std::string& name, std::vector<uint8_t>* out);

  // Like Read, but may return a view of the mapped file instead of copying
  // (safetensors); otherwise fills `scratch` and returns a view of it. The
  // view lives until the next call with the same scratch or until the
  // checkpoint is destroyed.
  absl::StatusOr<absl::Span<const uint8_t>> View(const std::string& name,
                                                 std::vector<uint8_t>* scratch);

  // True when `a` and `b` are the same view of the same bytes in the file
  // (tied weights saved once).
  bool SameData(const std::string& a, const std::string& b) const;

 private:
  Checkpoint() = default;
  absl::Status LoadTorch();
  absl::Status LoadSafetensors();
  absl::Status Canonicalise(std::map<std::string, Tensor> by_source);

  std::string path_;
  Format format_ = Format::kTorchZip;
  bool lightning_ = false;
  bool old_names_ = false;
  uint64_t file_size_ = 0;
  std::unique_ptr<TorchArchive> torch_;
  std::unique_ptr<SafetensorsFile> safetensors_;
  std::map<std::string, TensorRef> torch_refs_;  // by source name
  std::map<std::string, Tensor> tensors_;
};

}  // namespace h3::loader

#endif  // H3_LOADER_CHECKPOINT_H_
