// Test support: the GPT-2 and BERT tokenizers from the data cache (scripts/fetch-data.sh), or a
// Catch warning and nothing when their files are not there, so that the caller can skip.
#pragma once

#include <optional>

#include <catch2/catch.hpp>

#include <ipuml/core/error.hpp>
#include <ipuml/datasets/gpt2_bpe.hpp>
#include <ipuml/datasets/wordpiece.hpp>

namespace ipuml::testing {

inline std::optional<datasets::Gpt2Tokenizer> gpt2_tokenizer_or_skip() {
  try {
    return datasets::Gpt2Tokenizer::load();
  } catch (const Error& e) {
    WARN("GPT-2 tokenizer files not in the data cache, skipping (" << e.what() << ")");
    return std::nullopt;
  }
}

inline std::optional<datasets::BertTokenizer> bert_tokenizer_or_skip() {
  try {
    return datasets::BertTokenizer::load();
  } catch (const Error& e) {
    WARN("BERT vocabulary not in the data cache, skipping (" << e.what() << ")");
    return std::nullopt;
  }
}

}  // namespace ipuml::testing
