// libFuzzer harness: GPT-2's tokenizer files, encoder.json and vocab.bpe, cut from one input (its
// first two bytes say where). Every input must load or throw ipuml::Error; a loaded tokenizer
// must give decode(encode(s)) == s for any bytes s (the header's promise), tried on a fixed text
// and on the input itself.
#include <ipuml/core/error.hpp>
#include <ipuml/datasets/gpt2_bpe.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t body = size - 2;
  const size_t cut = (size_t{data[0]} | size_t{data[1]} << 8) % (body + 1);
  const std::string encoder = ipuml::fuzz::write_file("encoder.json", data + 2, cut);
  const std::string merges = ipuml::fuzz::write_file("vocab.bpe", data + 2 + cut, body - cut);
  try {
    const auto tok = ipuml::datasets::Gpt2Tokenizer::from_files(encoder, merges);
    const std::string_view input(reinterpret_cast<const char*>(data), size < 512 ? size : 512);
    for (const std::string_view text :
         {std::string_view("Hello, world! It's 2026: naïve café ☕ 123\n\n  x"), input}) {
      const auto ids = tok.encode(text);
      for (const int64_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
      if (tok.decode(ids) != text) __builtin_trap();
    }
  } catch (const ipuml::Error&) {
  }
  return 0;
}
