// GPT-2's byte-level BPE tokenizer (as OpenAI's encoder.py and the npm gpt-3-encoder): the
// pre-tokenising pattern written out by hand over UTF-8, the byte-to-unicode map, merges by
// rank, and a cache of encoded words. decode(encode(s)) == s for any bytes s.
#pragma once

#include <ipuml/core/config.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ipuml::datasets {

class Gpt2Tokenizer {
 public:
  // encoder.json (token -> id, a JSON object) and vocab.bpe (a "#version" line, then one merge
  // "a b" per line, best first). Throws ipuml::Error naming the file and what is wrong.
  static Gpt2Tokenizer from_files(const std::string& encoder_json, const std::string& vocab_bpe);
  // The two files from `dir`, or (empty) from find_gpt2_tokenizer_dir().
  static Gpt2Tokenizer load(const std::string& dir = "");

  std::vector<int64_t> encode(std::string_view text) const;
  // Throws for an id outside [0, vocab_size()).
  std::string decode(const std::vector<int64_t>& ids) const;
  // The pieces GPT-2's pattern cuts `text` into, before byte-level BPE (their concatenation
  // is `text`):  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  static std::vector<std::string_view> pre_tokenize(std::string_view text);

  int64_t vocab_size() const { return static_cast<int64_t>(decoder_.size()); }
  // "<|endoftext|>" (50256 in GPT-2's vocabulary); -1 when the vocabulary has none.
  int64_t eos_token_id() const { return eos_; }
  const std::string& id_to_token(int64_t id) const;  // the byte-mapped token string

 private:
  Gpt2Tokenizer() = default;
  void bpe(const std::string& word, std::vector<int64_t>& out) const;

  std::unordered_map<std::string, int64_t> encoder_;
  std::vector<std::string> decoder_;
  std::unordered_map<std::string, int64_t> ranks_;  // "first second" -> rank
  std::string byte_encoder_[256];                   // byte -> its unicode character, UTF-8
  std::unordered_map<std::string, uint8_t> byte_decoder_;
  int64_t eos_ = -1;
  struct Cache;
  std::shared_ptr<Cache> cache_;
};

// The directory holding encoder.json and vocab.bpe: `hint` if non-empty, else <data cache>/gpt2
// (scripts/fetch-data.sh gpt2-tokenizer). The error says how to fetch them.
std::string find_gpt2_tokenizer_dir(const std::string& hint = "");

}  // namespace ipuml::datasets

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/gpt2_bpe_impl.hpp>
#endif
