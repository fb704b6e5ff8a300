// Test support: the GPT-2 and BERT tokenizers from the data cache (scripts/fetch-data.sh), or a
// Catch warning and nothing when their files are not there, so that the caller can skip.
#pragma once

#include <optional>

#include <catch2/catch.hpp>

#include <ipuml/core/error.hpp>
#include <ipuml/datasets/gpt2_bpe.hpp>
#include <ipuml/datasets/wordpiece.hpp>

namespace ipuml::testing {

// The tokenizer of type T (its load() reads the data cache), or nothing after a warning that
// names `files`.
template <class T>
std::optional<T> tokenizer_or_skip(const char* files) {
  try {
    return T::load();
  } catch (const Error& e) {
    WARN(files << " not in the data cache, skipping (" << e.what() << ")");
    return std::nullopt;
  }
}

inline std::optional<datasets::Gpt2Tokenizer> gpt2_tokenizer_or_skip() {
  return tokenizer_or_skip<datasets::Gpt2Tokenizer>("GPT-2 tokenizer files");
}

inline std::optional<datasets::BertTokenizer> bert_tokenizer_or_skip() {
  return tokenizer_or_skip<datasets::BertTokenizer>("BERT vocabulary");
}

}  // namespace ipuml::testing
