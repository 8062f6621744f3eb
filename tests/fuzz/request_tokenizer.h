#ifndef H3_TESTS_FUZZ_REQUEST_TOKENIZER_H_
#define H3_TESTS_FUZZ_REQUEST_TOKENIZER_H_

// A small GPT-2 byte-level BPE tokenizer for the request fuzzers: the 256
// byte tokens, a few merges and "<|endoftext|>", so that every text
// tokenizes. Made once; lives until the process exits.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/bytes_to_unicode.h"
#include "tokenizer/load.h"

namespace h3::fuzz {

inline const tokenizer::Tokenizer* RequestTokenizer() {
  static const tokenizer::Tokenizer* made = [] {
    std::string vocab = "{";
    for (int b = 0; b < 256; ++b) {
      std::string spelling =
          tokenizer::BytesToByteLevel(std::string(1, static_cast<char>(b)));
      if (spelling == "\"" || spelling == "\\") spelling = "\\" + spelling;
      vocab += "\"" + spelling + "\": " + std::to_string(b) + ", ";
    }
    vocab += "\"th\": 256, \"the\": 257, \"\xc4\xa0the\": 258, ";
    vocab += "\"<|endoftext|>\": 259}";
    const std::string merges = "#version: 0.2\nt h\nth e\n\xc4\xa0 the\n";
    auto loaded = tokenizer::LoadTokenizer(
        "gpt2-bpe", {{"vocab.json", vocab}, {"merges.txt", merges}});
    if (!loaded.ok()) std::abort();
    return loaded->release();
  }();
  return made;
}

}  // namespace h3::fuzz

#endif  // H3_TESTS_FUZZ_REQUEST_TOKENIZER_H_
