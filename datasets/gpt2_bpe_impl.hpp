// Bodies of <ipuml/datasets/gpt2_bpe.hpp>: compiled once in src/lib/datasets_text.cpp, or
// included by the header in header-only mode.
#pragma once

#include <ipuml/datasets/data_cache.hpp>
#include <ipuml/datasets/gpt2_bpe.hpp>
#include <ipuml/datasets/unicode.hpp>

#include <ipuml/core/error.hpp>
#include <ipuml/io/file.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <mutex>
#include <sstream>

namespace ipuml::datasets {

namespace gpt2_detail {

inline constexpr uint64_t kMaxTokenizerFile = uint64_t{64} << 20;  // 64 MiB: GPT-2's is 1 MiB
inline constexpr size_t kCacheLimit = 1 << 18;                     // words kept before a reset

inline std::string read_text(const std::string& path, const char* what) {
  const auto bytes = io::read_regular_file(path, std::string("gpt2 tokenizer: cannot read ") + what,
                                           kMaxTokenizerFile);
  return std::string(bytes.begin(), bytes.end());
}

// OpenAI's bytes_to_unicode: printable bytes stand for themselves, the others are moved to
// U+0100 upwards, so every byte is a visible character and no token contains a space.
inline std::vector<char32_t> bytes_to_unicode() {
  std::vector<char32_t> map(256, 0);
  std::vector<bool> printable(256, false);
  for (int b = '!'; b <= '~'; ++b) printable[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) map[b] = printable[b] ? char32_t(b) : next++;
  return map;
}

enum class Class { Letter, Number, Space, Other };

inline Class classify(const unicode::Char& c) {
  if (!c.valid) return Class::Other;  // a stray byte travels with the punctuation-like run
  if (unicode::is_letter(c.cp)) return Class::Letter;
  if (unicode::is_number(c.cp)) return Class::Number;
  if (unicode::is_js_space(c.cp)) return Class::Space;
  return Class::Other;
}

}  // namespace gpt2_detail

struct Gpt2Tokenizer::Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int64_t>> words;
};

IPUML_INLINE std::vector<std::string_view> Gpt2Tokenizer::pre_tokenize(std::string_view text) {
  using gpt2_detail::Class;
  const auto chars = unicode::decode_utf8(text);
  std::vector<Class> cls(chars.size());
  for (size_t i = 0; i < chars.size(); ++i) cls[i] = gpt2_detail::classify(chars[i]);
  std::vector<std::string_view> out;
  const size_t n = chars.size();
  auto emit = [&](size_t from, size_t to) {  // characters [from, to)
    const size_t begin = chars[from].offset;
    const size_t end = to < n ? chars[to].offset : text.size();
    out.push_back(text.substr(begin, end - begin));
  };
  auto run_end = [&](size_t from, Class c) {
    size_t j = from;
    while (j < n && cls[j] == c) ++j;
    return j;
  };
  size_t i = 0;
  while (i < n) {
    // 's|'t|'re|'ve|'m|'ll|'d (ASCII, case-sensitive, tried in this order).
    if (chars[i].cp == '\'' && i + 1 < n) {
      const char32_t a = chars[i + 1].cp, b = i + 2 < n ? chars[i + 2].cp : 0;
      size_t len = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        len = 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        len = 3;
      if (len) {
        emit(i, i + len);
        i += len;
        continue;
      }
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020 then a run of one class.
    const bool space = chars[i].cp == ' ' && i + 1 < n && cls[i + 1] != Class::Space;
    const size_t start = space ? i + 1 : i;
    if (cls[start] != Class::Space) {
      const size_t end = run_end(start, cls[start]);
      emit(i, end);
      i = end;
      continue;
    }
    // `\s+(?!\S)`: a whitespace run, less its last character when a non-space follows it;
    // `\s+` takes a single whitespace character before a non-space.
    size_t end = run_end(i, Class::Space);
    if (end < n && end - i > 1) --end;
    emit(i, end);
    i = end;
  }
  return out;
}

IPUML_INLINE Gpt2Tokenizer Gpt2Tokenizer::from_files(const std::string& encoder_json,
                                                     const std::string& vocab_bpe) {
  Gpt2Tokenizer t;
  t.cache_ = std::make_shared<Cache>();
  const auto map = gpt2_detail::bytes_to_unicode();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    unicode::append_utf8(s, map[b]);
    t.byte_encoder_[b] = s;
    t.byte_decoder_[s] = static_cast<uint8_t>(b);
  }

  nlohmann::json enc;
  try {
    enc = nlohmann::json::parse(gpt2_detail::read_text(encoder_json, "encoder.json"));
  } catch (const nlohmann::json::exception& e) {
    fail("gpt2 tokenizer: '", encoder_json,
         "' is not valid JSON (expected encoder.json, a token -> id object; truncated?): ",
         e.what());
  }
  IPUML_CHECK(enc.is_object() && !enc.empty(), "gpt2 tokenizer: '", encoder_json,
              "' is not a non-empty JSON object of token -> id (expected GPT-2's encoder.json)");
  const int64_t n = static_cast<int64_t>(enc.size());
  t.decoder_.assign(static_cast<size_t>(n), std::string());
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (auto it = enc.begin(); it != enc.end(); ++it) {
    IPUML_CHECK(it.value().is_number_integer(), "gpt2 tokenizer: '", encoder_json, "': token '",
                it.key(), "' maps to ", it.value().dump(), ", expected an integer id");
    const int64_t id = it.value().get<int64_t>();
    IPUML_CHECK(id >= 0 && id < n && !seen[static_cast<size_t>(id)], "gpt2 tokenizer: '",
                encoder_json, "': token '", it.key(), "' has id ", id, ", expected ids 0..", n - 1,
                " each used once");
    seen[static_cast<size_t>(id)] = true;
    t.decoder_[static_cast<size_t>(id)] = it.key();
    t.encoder_.emplace(it.key(), id);
  }
  // Every single byte must be a token, or some text could not be encoded.
  for (int b = 0; b < 256; ++b)
    IPUML_CHECK(t.encoder_.count(t.byte_encoder_[b]), "gpt2 tokenizer: '", encoder_json,
                "' lacks the token for byte ", b, " (expected all 256 byte tokens)");
  if (auto it = t.encoder_.find("<|endoftext|>"); it != t.encoder_.end()) t.eos_ = it->second;

  const std::string merges = gpt2_detail::read_text(vocab_bpe, "vocab.bpe");
  std::istringstream in(merges);
  std::string line;
  int64_t line_no = 0, rank = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const auto sp = line.find(' ');
    IPUML_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() &&
                    line.find(' ', sp + 1) == std::string::npos,
                "gpt2 tokenizer: '", vocab_bpe, "' line ", line_no, " is '", line,
                "', expected a merge of two tokens 'a b'");
    const std::string merged = line.substr(0, sp) + line.substr(sp + 1);
    IPUML_CHECK(t.encoder_.count(merged), "gpt2 tokenizer: '", vocab_bpe, "' line ", line_no,
                ": the merge '", line, "' makes '", merged, "', which '", encoder_json,
                "' does not list (mismatched files?)");
    t.ranks_.emplace(line, rank++);
  }
  IPUML_CHECK(rank > 0, "gpt2 tokenizer: '", vocab_bpe, "' has no merges (expected GPT-2's ",
              "vocab.bpe)");
  return t;
}

IPUML_INLINE std::string find_gpt2_tokenizer_dir(const std::string& hint) {
  namespace fs = std::filesystem;
  std::vector<std::string> places;
  // An explicit directory is taken at its word rather than quietly replaced by the cache.
  places.push_back(hint.empty() ? data_cache_dir() + "/gpt2" : hint);
  std::error_code ec;
  for (const auto& p : places)
    if (fs::is_regular_file(fs::path(p) / "encoder.json", ec) &&
        fs::is_regular_file(fs::path(p) / "vocab.bpe", ec))
      return p;
  std::string list;
  for (const auto& p : places) list += (list.empty() ? "" : ", ") + p;
  fail("gpt2 tokenizer: no encoder.json and vocab.bpe in ", list,
       "; run scripts/fetch-data.sh gpt2-tokenizer (or set IPUML_DATA_DIR)");
}

IPUML_INLINE Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& dir) {
  const std::string d = find_gpt2_tokenizer_dir(dir);
  return from_files(d + "/encoder.json", d + "/vocab.bpe");
}

IPUML_INLINE void Gpt2Tokenizer::bpe(const std::string& word, std::vector<int64_t>& out) const {
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (auto it = cache_->words.find(word); it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  // The word as its unicode characters (one per byte), merged pair by pair, lowest rank first.
  std::vector<std::string> parts;
  for (const auto& c : unicode::decode_utf8(word)) parts.push_back(word.substr(c.offset, c.length));
  std::string key;
  while (parts.size() > 1) {
    int64_t best = std::numeric_limits<int64_t>::max();
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      key.assign(parts[i]).append(1, ' ').append(parts[i + 1]);
      if (auto it = ranks_.find(key); it != ranks_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == std::numeric_limits<int64_t>::max()) break;
    // Merge every occurrence of the best pair, left to right.
    const std::string first = parts[at], second = parts[at + 1];
    std::vector<std::string> merged;
    merged.reserve(parts.size());
    for (size_t i = 0; i < parts.size();) {
      if (i + 1 < parts.size() && parts[i] == first && parts[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(parts[i++]);
      }
    }
    parts = std::move(merged);
  }
  std::vector<int64_t> ids;
  ids.reserve(parts.size());
  for (const auto& p : parts) {
    auto it = encoder_.find(p);
    IPUML_CHECK(it != encoder_.end(), "gpt2 tokenizer: the BPE of a word produced '", p,
                "', which encoder.json does not list (mismatched encoder.json and vocab.bpe?)");
    ids.push_back(it->second);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_->mutex);
  if (cache_->words.size() >= gpt2_detail::kCacheLimit) cache_->words.clear();
  cache_->words.emplace(word, std::move(ids));
}

IPUML_INLINE std::vector<int64_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int64_t> out;
  std::string mapped;
  for (std::string_view piece : pre_tokenize(text)) {
    mapped.clear();
    for (unsigned char b : piece) mapped += byte_encoder_[b];
    bpe(mapped, out);
  }
  return out;
}

IPUML_INLINE const std::string& Gpt2Tokenizer::id_to_token(int64_t id) const {
  IPUML_CHECK(id >= 0 && id < vocab_size(), "gpt2 tokenizer: token id ", id,
              " is outside the vocabulary [0, ", vocab_size(), ")");
  return decoder_[static_cast<size_t>(id)];
}

IPUML_INLINE std::string Gpt2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    const std::string& tok = id_to_token(id);
    for (const auto& c : unicode::decode_utf8(tok)) {
      auto it = byte_decoder_.find(tok.substr(c.offset, c.length));
      IPUML_CHECK(it != byte_decoder_.end(), "gpt2 tokenizer: token ", id, " ('", tok,
                  "') has a character outside the byte alphabet");
      out += static_cast<char>(it->second);
    }
  }
  return out;
}

}  // namespace ipuml::datasets
