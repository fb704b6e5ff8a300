// libFuzzer harness: the SQuAD v1.1 JSON reader, then run_squad.py's features of what it read
// (with a small fixed vocabulary). Every input must load or throw ipuml::Error, and the features
// must point inside their sequences.
#include <ipuml/core/error.hpp>
#include <ipuml/datasets/text_data.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ipuml;
  static const datasets::BertTokenizer tok = datasets::BertTokenizer::from_tokens(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a",    "what", "is", "cat", "sat",
       "on",    "mat",   "?",     ".",     ",",      "##s", "##ed", "1",    "2",  "in",  "paris"},
      "fuzz");
  const std::string path = fuzz::write_file("squad.json", data, size);
  try {
    const auto examples = datasets::read_squad(path);
    if (examples.size() > 64) return 0;  // features of huge inputs are not the reader's concern
    datasets::SquadOptions o;
    o.max_seq_len = 24;
    o.doc_stride = 8;
    o.max_query_len = 8;
    const auto f = datasets::squad_features(examples, tok, o);
    if (f.size() == 0) return 0;
    for (const auto* t : {&f.start_positions, &f.end_positions})
      for (const int64_t p : t->to_vector<int64_t>())
        if (p < 0 || p >= o.max_seq_len) __builtin_trap();
    for (const int64_t i : f.example_index)
      if (i < 0 || i >= static_cast<int64_t>(examples.size())) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
