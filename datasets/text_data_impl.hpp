// Bodies of <ipuml/datasets/text_data.hpp>: compiled once in src/lib/datasets_text.cpp, or
// included by the header in header-only mode.
#pragma once

#include <ipuml/datasets/text_data.hpp>
#include <ipuml/datasets/unicode.hpp>

#include <ipuml/core/error.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/io/file.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

namespace ipuml::datasets {

namespace text_detail {

inline constexpr uint64_t kMaxTextFile = uint64_t{1} << 30;

inline std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

inline Tensor rows_tensor(const std::vector<int64_t>& flat, int64_t rows, int64_t cols) {
  return from_vector<int64_t>(flat, {rows, cols});
}

}  // namespace text_detail

IPUML_INLINE std::string find_fortunes_dir(const std::string& hint) {
  namespace fs = std::filesystem;
  const std::string dir = hint.empty() ? std::string("/usr/share/games/fortunes") : hint;
  std::error_code ec;
  IPUML_CHECK(fs::is_directory(dir, ec), "fortunes: '", dir,
              "' is not a directory of fortune files; install the Debian packages fortunes-min "
              "and fortunes (scripts/install-deps.sh, or scripts/fetch-data.sh text-corpus)");
  return dir;
}

IPUML_INLINE std::vector<std::string> read_fortunes(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(find_fortunes_dir(dir), ec)) {
    const auto ext = e.path().extension().string();
    if (ext == ".dat" || ext == ".u8" || e.is_symlink() || !e.is_regular_file()) continue;
    files.push_back(e.path());
  }
  IPUML_CHECK(!ec, "fortunes: cannot list '", dir, "': ", ec.message());
  std::sort(files.begin(), files.end());
  std::vector<std::string> docs;
  for (const auto& f : files) {
    const auto bytes =
        io::read_regular_file(f.string(), "fortunes: cannot read", text_detail::kMaxTextFile);
    const std::string text(bytes.begin(), bytes.end());
    size_t at = 0;
    std::string cur;
    while (at < text.size()) {
      size_t nl = text.find('\n', at);
      if (nl == std::string::npos) nl = text.size();
      std::string_view line(text.data() + at, nl - at);
      if (line == "%" || line == "%\r") {
        if (auto t = text_detail::trim(cur); !t.empty()) docs.push_back(std::move(t));
        cur.clear();
      } else {
        cur.append(line).append("\n");
      }
      at = nl + 1;
    }
    if (auto t = text_detail::trim(cur); !t.empty()) docs.push_back(std::move(t));
  }
  IPUML_CHECK(!docs.empty(), "fortunes: no fortunes in '", dir, "' (expected files of texts ",
              "separated by lines holding a single %)");
  return docs;
}

IPUML_INLINE DocumentSplit split_documents(const std::vector<std::string>& documents,
                                           int64_t every) {
  IPUML_CHECK(every >= 2, "split_documents: every must be >= 2, got ", every);
  DocumentSplit s;
  for (size_t i = 0; i < documents.size(); ++i)
    (static_cast<int64_t>(i) % every == every - 1 ? s.validation : s.train).push_back(documents[i]);
  return s;
}

IPUML_INLINE std::vector<int64_t> tokenize_documents(
    const std::vector<std::string>& documents,
    const std::function<std::vector<int64_t>(std::string_view)>& encode, int64_t separator) {
  std::vector<int64_t> out;
  for (const auto& d : documents) {
    const auto ids = encode(d);
    out.insert(out.end(), ids.begin(), ids.end());
    if (separator >= 0) out.push_back(separator);
  }
  return out;
}

IPUML_INLINE Tensor pack_sequences(const std::vector<int64_t>& tokens, int64_t length) {
  IPUML_CHECK(length >= 2, "pack_sequences: length must be >= 2 (inputs and next tokens), got ",
              length);
  const int64_t rows = static_cast<int64_t>(tokens.size()) / length;
  IPUML_CHECK(rows >= 1, "pack_sequences: ", tokens.size(), " tokens do not fill one sequence of ",
              length);
  return text_detail::rows_tensor(
      std::vector<int64_t>(tokens.begin(), tokens.begin() + rows * length), rows, length);
}

IPUML_INLINE UnigramModel::UnigramModel(const std::vector<int64_t>& train_tokens,
                                        int64_t vocab_size)
    : counts_(static_cast<size_t>(vocab_size), 0) {
  IPUML_CHECK(vocab_size >= 1, "UnigramModel: vocab_size must be positive, got ", vocab_size);
  for (int64_t t : train_tokens) {
    IPUML_CHECK(t >= 0 && t < vocab_size, "UnigramModel: token ", t, " is outside [0, ", vocab_size,
                ")");
    ++counts_[static_cast<size_t>(t)];
  }
  total_ = static_cast<int64_t>(train_tokens.size());
}

IPUML_INLINE double UnigramModel::log_prob(int64_t token) const {
  IPUML_CHECK(token >= 0 && token < static_cast<int64_t>(counts_.size()), "UnigramModel: token ",
              token, " is outside the vocabulary");
  return std::log(double(counts_[static_cast<size_t>(token)] + 1)) -
         std::log(double(total_) + double(counts_.size()));
}

IPUML_INLINE double UnigramModel::perplexity(const Tensor& packed) const {
  IPUML_CHECK(packed.dim() == 2 && packed.size(1) >= 2, "UnigramModel.perplexity: expected [N, L] ",
              "with L >= 2, got ", shape_str(packed.shape()));
  const auto v = packed.contiguous().to(kInt64).to_vector<int64_t>();
  const int64_t n = packed.size(0), l = packed.size(1);
  double sum = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 1; c < l; ++c) sum += log_prob(v[static_cast<size_t>(r * l + c)]);
  return std::exp(-sum / double(n * (l - 1)));
}

IPUML_INLINE Tensor generated_tokens(int64_t rows, int64_t length, int64_t vocab_size,
                                     uint64_t seed) {
  IPUML_CHECK(rows >= 1 && length >= 1 && vocab_size >= 2, "generated_tokens: expected rows, ",
              "length >= 1 and vocab_size >= 2, got ", rows, ", ", length, ", ", vocab_size);
  const RandomStream rs{seed, 0x6765'6e65'7261'7465ULL};  // "generate"
  std::vector<int64_t> v(static_cast<size_t>(rows * length));
  for (size_t i = 0; i < v.size(); ++i) v[i] = rs.integer(i, 1, vocab_size);
  return text_detail::rows_tensor(v, rows, length);
}

IPUML_INLINE std::vector<std::string> split_sentences(std::string_view document) {
  std::vector<std::string> out;
  std::string cur;
  bool space = false;
  for (char c : document) {
    const bool ws = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (ws) {
      space = !cur.empty();
      continue;
    }
    if (space) {
      const char last = cur.back();
      if (last == '.' || last == '!' || last == '?') {
        out.push_back(cur);
        cur.clear();
      } else {
        cur += ' ';
      }
      space = false;
    }
    cur += c;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

IPUML_INLINE void mask_tokens(std::vector<int64_t>& ids, std::vector<int64_t>& labels,
                              const std::function<bool(int64_t)>& is_special, int64_t mask_id,
                              int64_t vocab_size, uint64_t seed, uint64_t stream,
                              const MlmOptions& options) {
  IPUML_CHECK(options.mask_prob > 0 && options.mask_prob <= 1, "mask_tokens: mask_prob ",
              options.mask_prob, " must be in (0, 1]");
  labels.assign(ids.size(), -100);
  std::vector<size_t> cand;
  for (size_t i = 0; i < ids.size(); ++i)
    if (!is_special(ids[i])) cand.push_back(i);
  if (cand.empty()) return;
  int64_t n = std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(options.mask_prob * double(cand.size()))));
  if (options.max_predictions > 0) n = std::min(n, options.max_predictions);
  const RandomStream rs{seed, stream};
  uint64_t k = 0;
  // A partial Fisher-Yates shuffle picks n distinct candidates.
  for (int64_t j = 0; j < n; ++j) {
    const size_t pick = static_cast<size_t>(rs.integer(k++, j, static_cast<int64_t>(cand.size())));
    std::swap(cand[static_cast<size_t>(j)], cand[pick]);
    const size_t pos = cand[static_cast<size_t>(j)];
    labels[pos] = ids[pos];
    const float r = rs.uniform(k++);
    if (r < 0.8f)
      ids[pos] = mask_id;
    else if (r < 0.9f)
      ids[pos] = rs.integer(k++, 0, vocab_size);
  }
}

namespace text_detail {

struct PairRows {
  std::vector<int64_t> ids, types, mask, labels, nsp;
  int64_t rows = 0;
};

inline void add_pair(PairRows& p, const BertTokenizer& tok, std::vector<int64_t> a,
                     std::vector<int64_t> b, int64_t nsp, int64_t max_len, uint64_t seed,
                     const MlmOptions& options) {
  while (static_cast<int64_t>(a.size() + b.size()) > max_len - 3)
    (a.size() > b.size() ? a : b).pop_back();
  std::vector<int64_t> ids{tok.cls_id()}, types{0};
  for (int64_t t : a) ids.push_back(t), types.push_back(0);
  ids.push_back(tok.sep_id()), types.push_back(0);
  for (int64_t t : b) ids.push_back(t), types.push_back(1);
  ids.push_back(tok.sep_id()), types.push_back(1);
  std::vector<int64_t> labels;
  mask_tokens(
      ids, labels, [&](int64_t id) { return tok.is_special(id); }, tok.mask_id(), tok.vocab_size(),
      seed, 0x6d6c6d00ULL + static_cast<uint64_t>(p.rows), options);
  const size_t used = ids.size();
  for (size_t i = 0; i < static_cast<size_t>(max_len); ++i) {
    const bool in = i < used;
    p.ids.push_back(in ? ids[i] : tok.pad_id());
    p.types.push_back(in ? types[i] : 0);
    p.mask.push_back(in ? 1 : 0);
    p.labels.push_back(in ? labels[i] : -100);
  }
  p.nsp.push_back(nsp);
  ++p.rows;
}

inline BertPretrainingData finish(const PairRows& p, int64_t max_len) {
  BertPretrainingData d;
  if (p.rows == 0) return d;
  d.input_ids = rows_tensor(p.ids, p.rows, max_len);
  d.token_type_ids = rows_tensor(p.types, p.rows, max_len);
  d.attention_mask = rows_tensor(p.mask, p.rows, max_len);
  d.mlm_labels = rows_tensor(p.labels, p.rows, max_len);
  d.nsp_labels = from_vector<int64_t>(p.nsp, {p.rows});
  return d;
}

}  // namespace text_detail

IPUML_INLINE BertPretrainingData make_bert_pretraining(const std::vector<std::string>& documents,
                                                       const BertTokenizer& tokenizer,
                                                       int64_t max_len, uint64_t seed,
                                                       const MlmOptions& options) {
  IPUML_CHECK(max_len >= 8, "make_bert_pretraining: max_len must be >= 8, got ", max_len);
  std::vector<std::vector<std::vector<int64_t>>> docs;
  for (const auto& d : documents) {
    std::vector<std::vector<int64_t>> sents;
    for (const auto& s : split_sentences(d))
      if (auto ids = tokenizer.encode(s); !ids.empty()) sents.push_back(std::move(ids));
    docs.push_back(std::move(sents));
  }
  const RandomStream coin{seed, 0x6e7370ULL};  // "nsp"
  uint64_t k = 0;
  text_detail::PairRows p;
  const int64_t ndocs = static_cast<int64_t>(docs.size());
  for (int64_t d = 0; d < ndocs; ++d) {
    const auto& sents = docs[static_cast<size_t>(d)];
    for (size_t i = 0; i + 1 < sents.size(); ++i) {
      const bool random_next = ndocs > 1 && coin.uniform(k++) < 0.5f;
      if (!random_next) {
        text_detail::add_pair(p, tokenizer, sents[i], sents[i + 1], 0, max_len, seed, options);
        continue;
      }
      // A sentence of another document that has one.
      int64_t other = d;
      for (int tries = 0; tries < 10 && (other == d || docs[static_cast<size_t>(other)].empty());
           ++tries)
        other = coin.integer(k++, 0, ndocs);
      if (other == d || docs[static_cast<size_t>(other)].empty()) {
        text_detail::add_pair(p, tokenizer, sents[i], sents[i + 1], 0, max_len, seed, options);
        continue;
      }
      const auto& os = docs[static_cast<size_t>(other)];
      const auto& b =
          os[static_cast<size_t>(coin.integer(k++, 0, static_cast<int64_t>(os.size())))];
      text_detail::add_pair(p, tokenizer, sents[i], b, 1, max_len, seed, options);
    }
  }
  IPUML_CHECK(p.rows > 0, "make_bert_pretraining: no document has two sentences to pair");
  return text_detail::finish(p, max_len);
}

IPUML_INLINE BertPretrainingData generated_bert_pretraining(int64_t rows, int64_t max_len,
                                                            int64_t vocab_size, uint64_t seed) {
  IPUML_CHECK(rows >= 1 && max_len >= 8 && vocab_size >= 8,
              "generated_bert_pretraining: expected rows >= 1, max_len >= 8 and vocab_size >= 8, "
              "got ",
              rows, ", ", max_len, ", ", vocab_size);
  // BERT's ids for the specials when the vocabulary is big enough, else the first ids.
  const bool bert = vocab_size > 999;
  const int64_t cls = bert ? 101 : 1, sep = bert ? 102 : 2, mask = bert ? 103 : 3,
                first = bert ? 999 : 4;
  const RandomStream rs{seed, 0x62657274ULL};  // "bert"
  uint64_t k = 0;
  text_detail::PairRows p;
  const int64_t half = (max_len - 3) / 2;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> ids{cls}, types{0};
    for (int64_t i = 0; i < half; ++i)
      ids.push_back(rs.integer(k++, first, vocab_size)), types.push_back(0);
    ids.push_back(sep), types.push_back(0);
    for (int64_t i = 0; i < max_len - 3 - half; ++i)
      ids.push_back(rs.integer(k++, first, vocab_size)), types.push_back(1);
    ids.push_back(sep), types.push_back(1);
    std::vector<int64_t> labels;
    mask_tokens(
        ids, labels, [&](int64_t id) { return id < first; }, mask, vocab_size, seed,
        0x6d6c6d00ULL + static_cast<uint64_t>(r));
    p.ids.insert(p.ids.end(), ids.begin(), ids.end());
    p.types.insert(p.types.end(), types.begin(), types.end());
    p.mask.insert(p.mask.end(), ids.size(), 1);
    p.labels.insert(p.labels.end(), labels.begin(), labels.end());
    p.nsp.push_back(rs.integer(k++, 0, 2));
    ++p.rows;
  }
  return text_detail::finish(p, max_len);
}

// ---- SQuAD ----------------------------------------------------------------------------------

IPUML_INLINE std::vector<SquadExample> read_squad(const std::string& path) {
  const auto bytes = io::read_regular_file(path, "squad: cannot read", text_detail::kMaxTextFile);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {
    fail("squad: '", path, "' is not valid JSON (truncated?): ", e.what());
  }
  auto field = [&](const nlohmann::json& o, const char* key,
                   const std::string& where) -> const nlohmann::json& {
    IPUML_CHECK(o.is_object() && o.contains(key), "squad: '", path, "': ", where, " has no '", key,
                "' (expected the SQuAD v1.1 layout data/paragraphs/qas/answers)");
    return o.at(key);
  };
  auto str = [&](const nlohmann::json& o, const char* key, const std::string& where) {
    const auto& v = field(o, key, where);
    IPUML_CHECK(v.is_string(), "squad: '", path, "': ", where, ".", key, " is ", v.dump(),
                ", expected a string");
    return v.get<std::string>();
  };
  std::vector<SquadExample> out;
  const auto& data = field(j, "data", "the top level");
  IPUML_CHECK(data.is_array(), "squad: '", path, "': data is not a list");
  for (size_t a = 0; a < data.size(); ++a) {
    const std::string wa = "data[" + std::to_string(a) + "]";
    const auto& paras = field(data[a], "paragraphs", wa);
    IPUML_CHECK(paras.is_array(), "squad: '", path, "': ", wa, ".paragraphs is not a list");
    for (size_t p = 0; p < paras.size(); ++p) {
      const std::string wp = wa + ".paragraphs[" + std::to_string(p) + "]";
      const std::string context = str(paras[p], "context", wp);
      const int64_t context_chars = static_cast<int64_t>(unicode::decode_utf8(context).size());
      const auto& qas = field(paras[p], "qas", wp);
      IPUML_CHECK(qas.is_array(), "squad: '", path, "': ", wp, ".qas is not a list");
      for (size_t q = 0; q < qas.size(); ++q) {
        const std::string wq = wp + ".qas[" + std::to_string(q) + "]";
        SquadExample ex;
        ex.id = qas[q].contains("id") && qas[q]["id"].is_string() ? qas[q]["id"].get<std::string>()
                                                                  : wq;
        ex.question = str(qas[q], "question", wq);
        ex.context = context;
        const auto& answers = field(qas[q], "answers", wq);
        IPUML_CHECK(answers.is_array(), "squad: '", path, "': ", wq, ".answers is not a list");
        if (!answers.empty()) {
          const std::string wn = wq + ".answers[0]";
          ex.answer_text = str(answers[0], "text", wn);
          const auto& st = field(answers[0], "answer_start", wn);
          IPUML_CHECK(st.is_number_integer(), "squad: '", path, "': ", wn,
                      ".answer_start is not an integer");
          ex.answer_start = st.get<int64_t>();
          const int64_t len = static_cast<int64_t>(unicode::decode_utf8(ex.answer_text).size());
          IPUML_CHECK(ex.answer_start >= 0 && len > 0 && ex.answer_start + len <= context_chars,
                      "squad: '", path, "': ", wn, " starts at ", ex.answer_start, " with ", len,
                      " characters, outside the context's ", context_chars);
        }
        out.push_back(std::move(ex));
      }
    }
  }
  return out;
}

IPUML_INLINE SquadFeatures squad_features(const std::vector<SquadExample>& examples,
                                          const BertTokenizer& tok, const SquadOptions& o) {
  IPUML_CHECK(o.max_seq_len >= 8 && o.doc_stride >= 1 && o.max_query_len >= 1 &&
                  o.max_query_len + 4 <= o.max_seq_len,
              "squad_features: expected max_seq_len >= 8, doc_stride >= 1 and 1 <= max_query_len "
              "<= max_seq_len - 4, got ",
              o.max_seq_len, ", ", o.doc_stride, ", ", o.max_query_len);
  SquadFeatures f;
  std::vector<int64_t> ids, types, mask, starts, ends;
  for (size_t e = 0; e < examples.size(); ++e) {
    const auto& ex = examples[e];
    std::vector<int64_t> query = tok.encode(ex.question);
    if (static_cast<int64_t>(query.size()) > o.max_query_len)
      query.resize(static_cast<size_t>(o.max_query_len));
    // run_squad.py: whitespace-separated words, and for each character the word it is in.
    const auto chars = unicode::decode_utf8(ex.context);
    std::vector<std::string> words;
    std::vector<int64_t> char_to_word;
    bool prev_ws = true;
    for (const auto& c : chars) {
      const bool ws = c.cp == ' ' || c.cp == '\t' || c.cp == '\r' || c.cp == '\n' || c.cp == 0x202F;
      if (ws) {
        prev_ws = true;
      } else {
        if (prev_ws) words.emplace_back();
        words.back().append(ex.context, c.offset, c.length);
        prev_ws = false;
      }
      char_to_word.push_back(static_cast<int64_t>(words.size()) - 1);
    }
    std::vector<int64_t> doc, tok_to_word, word_to_tok;
    for (size_t w = 0; w < words.size(); ++w) {
      word_to_tok.push_back(static_cast<int64_t>(doc.size()));
      for (int64_t t : tok.encode(words[w])) {
        doc.push_back(t);
        tok_to_word.push_back(static_cast<int64_t>(w));
      }
    }
    int64_t tok_start = -1, tok_end = -1;
    if (ex.answer_start >= 0 && !doc.empty()) {
      const int64_t len = static_cast<int64_t>(unicode::decode_utf8(ex.answer_text).size());
      const int64_t sw = std::max<int64_t>(char_to_word[static_cast<size_t>(ex.answer_start)], 0);
      const int64_t ew =
          std::max<int64_t>(char_to_word[static_cast<size_t>(ex.answer_start + len - 1)], 0);
      tok_start = word_to_tok[static_cast<size_t>(sw)];
      tok_end = ew + 1 < static_cast<int64_t>(words.size())
                    ? word_to_tok[static_cast<size_t>(ew + 1)] - 1
                    : static_cast<int64_t>(doc.size()) - 1;
      // _improve_answer_span: the tightest token span that spells the tokenized answer.
      const auto answer = tok.encode(ex.answer_text);
      bool done = false;
      for (int64_t s = tok_start; s <= tok_end && !done; ++s)
        for (int64_t t = tok_end; t >= s && !done; --t)
          if (t - s + 1 == static_cast<int64_t>(answer.size()) &&
              std::equal(answer.begin(), answer.end(), doc.begin() + s)) {
            tok_start = s, tok_end = t, done = true;
          }
    }
    const int64_t q = static_cast<int64_t>(query.size());
    const int64_t room = o.max_seq_len - q - 3;
    const int64_t n = static_cast<int64_t>(doc.size());
    for (int64_t at = 0;;) {
      const int64_t len = std::min(n - at, room);
      std::vector<int64_t> row{tok.cls_id()}, ty{0};
      for (int64_t t : query) row.push_back(t), ty.push_back(0);
      row.push_back(tok.sep_id()), ty.push_back(0);
      for (int64_t i = 0; i < len; ++i)
        row.push_back(doc[static_cast<size_t>(at + i)]), ty.push_back(1);
      row.push_back(tok.sep_id()), ty.push_back(1);
      int64_t sp = 0, ep = 0;
      if (tok_start >= at && tok_end < at + len && tok_start >= 0) {
        sp = tok_start - at + q + 2;
        ep = tok_end - at + q + 2;
      }
      const size_t used = row.size();
      for (size_t i = 0; i < static_cast<size_t>(o.max_seq_len); ++i) {
        ids.push_back(i < used ? row[i] : tok.pad_id());
        types.push_back(i < used ? ty[i] : 0);
        mask.push_back(i < used ? 1 : 0);
      }
      starts.push_back(sp);
      ends.push_back(ep);
      f.example_index.push_back(static_cast<int64_t>(e));
      if (at + len >= n) break;
      at += std::min(len, o.doc_stride);
    }
  }
  const int64_t rows = f.size();
  IPUML_CHECK(rows > 0, "squad_features: no examples");
  f.input_ids = text_detail::rows_tensor(ids, rows, o.max_seq_len);
  f.token_type_ids = text_detail::rows_tensor(types, rows, o.max_seq_len);
  f.attention_mask = text_detail::rows_tensor(mask, rows, o.max_seq_len);
  f.start_positions = from_vector<int64_t>(starts, {rows});
  f.end_positions = from_vector<int64_t>(ends, {rows});
  return f;
}

}  // namespace ipuml::datasets
