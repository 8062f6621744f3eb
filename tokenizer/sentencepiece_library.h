#ifndef H3_TOKENIZER_SENTENCEPIECE_LIBRARY_H_
#define H3_TOKENIZER_SENTENCEPIECE_LIBRARY_H_

// The one place that talks to the sentencepiece library. Its header defines
// `absl::string_view` as std::string_view, which clashes with Debian's
// abseil (whose string_view is its own class), so no file may include both:
// this header uses only the standard library, and sentencepiece_library.cc
// includes no abseil header.
//
// Debian's libsentencepiece also carries its own protobuf-lite (3.14) and
// exports its symbols. In a process that links libprotobuf (3.21: gRPC, the
// h3.v1 API), libprotobuf must come first in the link order or the process
// crashes at start-up; even then, sentencepiece's protobuf version check
// aborts the process on the first model. So Load refuses, with an error,
// in a process where libprotobuf is loaded: such a process cannot use
// sentencepiece models until the library is built against the system
// protobuf or loaded in isolation.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace h3::tokenizer::internal {

// A loaded sentencepiece model. Thread-safe: every method is const.
class SentencePieceLibrary {
 public:
  // Parses a serialized ModelProto. On failure returns nullptr and sets
  // *error to the library's message.
  static std::unique_ptr<SentencePieceLibrary> Load(std::string_view model,
                                                    std::string* error);
  ~SentencePieceLibrary();

  // Whether the full libprotobuf is loaded in this process (see above).
  static bool ProcessHasFullProtobuf();

  // On failure return false and set *error to the library's message.
  bool Encode(std::string_view text, std::vector<int>* ids,
              std::string* error) const;
  // REQUIRES: every id in [0, PieceSize()).
  bool Decode(const std::vector<int>& ids, std::string* text,
              std::string* error) const;

  int PieceSize() const;
  int EosId() const;  // -1 if none
  int BosId() const;  // -1 if none
  bool IsByte(int id) const;
  // REQUIRES: id in [0, PieceSize()). The reference lives as long as this.
  const std::string& IdToPiece(int id) const;

 private:
  SentencePieceLibrary();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace h3::tokenizer::internal

#endif  // H3_TOKENIZER_SENTENCEPIECE_LIBRARY_H_
