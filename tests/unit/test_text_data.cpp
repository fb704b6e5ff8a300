// The text pipelines: the fortunes corpus, packing, the train/validation split, the unigram
// baseline, generated ids, BERT's masking statistics and next-sentence pairs, and SQuAD
// features on tests/data/squad_tiny.json.
#include <ipuml/datasets/text_data.hpp>
#include <ipuml/datasets/wordpiece.hpp>

#include <catch2/catch.hpp>

#include "../support/tokenizers.hpp"
#include "../support/error_of.hpp"

#include "../support/temp_dir.hpp"

#include <cmath>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace ipuml;
using namespace ipuml::datasets;

namespace {

using ipuml::testing::error_of;

const std::string kSquad = std::string(IPUML_SOURCE_DIR) + "/tests/data/squad_tiny.json";

}  // namespace

TEST_CASE("text data: fortunes are read, split and packed deterministically", "[text_data]") {
  testing::TempDir dir("ipuml_test_fortunes");
  std::ofstream(dir.file("b")) << "second file one\n%\n  \n%\nsecond two\n";
  std::ofstream(dir.file("a")) << "first\nfortune\n%\nanother one\n";
  std::ofstream(dir.file("a.dat")) << "binary index";
  const auto docs = read_fortunes(dir.path.string());
  CHECK(docs ==
        std::vector<std::string>{"first\nfortune", "another one", "second file one", "second two"});
  const auto split = split_documents(docs, 2);
  CHECK(split.train == std::vector<std::string>{"first\nfortune", "second file one"});
  CHECK(split.validation == std::vector<std::string>{"another one", "second two"});
  CHECK_THAT(error_of([&] { read_fortunes(dir.file("nowhere")); }),
             Catch::Contains("fortunes-min"));

  const auto toks = tokenize_documents(
      {"ab", "c"}, [](std::string_view s) { return std::vector<int64_t>(s.begin(), s.end()); }, 7);
  CHECK(toks == std::vector<int64_t>{'a', 'b', 7, 'c', 7});
  const Tensor packed = pack_sequences({1, 2, 3, 4, 5, 6, 7}, 3);
  CHECK(packed.shape() == Shape{2, 3});
  CHECK(packed.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK_THAT(error_of([] { pack_sequences({1, 2}, 3); }), Catch::Contains("do not fill"));
}

TEST_CASE("text data: the real fortunes corpus", "[text_data]") {
  std::vector<std::string> docs;
  try {
    docs = read_fortunes(find_fortunes_dir());
  } catch (const Error& e) {
    WARN("fortunes not installed, skipping (" << e.what() << ")");
    return;
  }
  CHECK(docs.size() > 1000);
  const auto split = split_documents(docs);
  CHECK(split.validation.size() == docs.size() / 20);
  CHECK(split_documents(docs).validation == split.validation);
}

TEST_CASE("text data: unigram baseline perplexity", "[text_data]") {
  // Train counts: token 0 x3, token 1 x1, vocab 4: p = (c+1)/(4+4).
  UnigramModel m({0, 0, 0, 1}, 4);
  CHECK(m.log_prob(0) == Approx(std::log(4.0 / 8)));
  CHECK(m.log_prob(3) == Approx(std::log(1.0 / 8)));
  // Only the predicted columns (all but the first) count.
  const Tensor val = from_vector<int64_t>({3, 0, 1}, {1, 3});
  CHECK(m.perplexity(val) == Approx(std::exp(-(std::log(0.5) + std::log(0.25)) / 2)));
  // A uniform model's perplexity is the vocabulary size.
  UnigramModel u({}, 10);
  CHECK(u.perplexity(from_vector<int64_t>({1, 2, 3, 4}, {2, 2})) == Approx(10.0));
}

TEST_CASE("text data: generated token ids", "[text_data]") {
  const Tensor a = generated_tokens(4, 9, 50, 7), b = generated_tokens(4, 9, 50, 7);
  CHECK(a.shape() == Shape{4, 9});
  CHECK(a.to_vector<int64_t>() == b.to_vector<int64_t>());
  CHECK(a.to_vector<int64_t>() != generated_tokens(4, 9, 50, 8).to_vector<int64_t>());
  for (int64_t v : generated_tokens(100, 10, 5, 1).to_vector<int64_t>()) {
    CHECK(v >= 1);
    CHECK(v < 5);
  }
}

TEST_CASE("text data: BERT masking statistics", "[text_data]") {
  // 200 sequences of 100 tokens, the first and last special: 98 candidates each.
  int64_t masked = 0, as_mask = 0, kept = 0, random = 0, total_cand = 0;
  for (uint64_t s = 0; s < 200; ++s) {
    std::vector<int64_t> ids(100);
    for (int64_t i = 0; i < 100; ++i) ids[static_cast<size_t>(i)] = 1000 + i;
    ids.front() = 1, ids.back() = 2;
    const auto orig = ids;
    std::vector<int64_t> labels;
    mask_tokens(
        ids, labels, [](int64_t id) { return id < 10; }, 3, 5000, 42, s);
    CHECK(labels.front() == -100);
    CHECK(labels.back() == -100);
    CHECK(ids.front() == 1);
    CHECK(ids.back() == 2);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (labels[i] == -100) {
        CHECK(ids[i] == orig[i]);
        continue;
      }
      CHECK(labels[i] == orig[i]);
      ++masked;
      if (ids[i] == 3)
        ++as_mask;
      else if (ids[i] == orig[i])
        ++kept;
      else
        ++random;
    }
    total_cand += 98;
  }
  CHECK(masked == 200 * 15);  // round(0.15 x 98) = 15 per sequence
  CHECK(double(as_mask) / double(masked) == Approx(0.8).margin(0.03));
  CHECK(double(random) / double(masked) == Approx(0.1).margin(0.02));
  CHECK(double(kept) / double(masked) == Approx(0.1).margin(0.02));
  (void)total_cand;
  // Deterministic from the seed.
  std::vector<int64_t> a(50, 500), b(50, 500), la, lb;
  mask_tokens(
      a, la, [](int64_t) { return false; }, 3, 1000, 9, 1);
  mask_tokens(
      b, lb, [](int64_t) { return false; }, 3, 1000, 9, 1);
  CHECK(a == b);
  CHECK(la == lb);
}

TEST_CASE("text data: BERT next-sentence pairs", "[text_data]") {
  auto tok = ipuml::testing::bert_tokenizer_or_skip();
  if (!tok) return;
  std::vector<std::string> docs;
  for (int d = 0; d < 40; ++d)
    docs.push_back("Document number " + std::to_string(d) +
                   " starts here. It goes on for a while! "
                   "Does it end? It ends now.");
  const auto data = make_bert_pretraining(docs, *tok, 32, 5);
  REQUIRE(data.size() == 40 * 3);
  CHECK(data.input_ids.shape() == Shape{120, 32});
  const auto ids = data.input_ids.to_vector<int64_t>();
  const auto types = data.token_type_ids.to_vector<int64_t>();
  const auto mask = data.attention_mask.to_vector<int64_t>();
  const auto labels = data.mlm_labels.to_vector<int64_t>();
  const auto nsp = data.nsp_labels.to_vector<int64_t>();
  int64_t random_next = 0;
  for (int64_t r = 0; r < 120; ++r) {
    const size_t o = static_cast<size_t>(r * 32);
    CHECK(ids[o] == tok->cls_id());
    int64_t seps = 0, used = 0, predicted = 0;
    for (size_t i = 0; i < 32; ++i) {
      if (ids[o + i] == tok->sep_id() && labels[o + i] == -100) ++seps;
      used += mask[o + i];
      if (labels[o + i] != -100) ++predicted;
      if (!mask[o + i]) CHECK(ids[o + i] == tok->pad_id());
      if (labels[o + i] != -100) CHECK_FALSE(tok->is_special(labels[o + i]));
    }
    CHECK(seps == 2);
    CHECK(predicted >= 1);
    CHECK(types[o] == 0);
    CHECK(types[o + static_cast<size_t>(used) - 1] == 1);
    random_next += nsp[static_cast<size_t>(r)];
  }
  CHECK(random_next > 40);
  CHECK(random_next < 80);
  const auto again = make_bert_pretraining(docs, *tok, 32, 5);
  CHECK(again.input_ids.to_vector<int64_t>() == ids);
  CHECK(again.nsp_labels.to_vector<int64_t>() == nsp);
  CHECK(split_sentences(" One.  Two!\nThree?four. ") ==
        std::vector<std::string>{"One.", "Two!", "Three?four."});
  const auto gen = generated_bert_pretraining(3, 16, 1000, 1);
  CHECK(gen.input_ids.shape() == Shape{3, 16});
  CHECK(gen.nsp_labels.shape() == Shape{3});
}

TEST_CASE("text data: SQuAD features on the committed file", "[text_data]") {
  const auto examples = read_squad(kSquad);
  REQUIRE(examples.size() == 4);
  CHECK(examples[0].id == "q1");
  CHECK(examples[0].answer_text == "a piece of paper");
  CHECK(examples[3].answer_start == 189);
  auto tok = ipuml::testing::bert_tokenizer_or_skip();
  if (!tok) return;
  SquadOptions o;
  o.max_seq_len = 32;
  o.doc_stride = 8;
  o.max_query_len = 12;
  const auto f = squad_features(examples, *tok, o);
  REQUIRE(f.size() > 4);  // the contexts need several windows of 32
  const auto ids = f.input_ids.to_vector<int64_t>();
  const auto types = f.token_type_ids.to_vector<int64_t>();
  const auto starts = f.start_positions.to_vector<int64_t>();
  const auto ends = f.end_positions.to_vector<int64_t>();
  std::set<int64_t> answered;
  for (int64_t r = 0; r < f.size(); ++r) {
    const size_t o32 = static_cast<size_t>(r * 32);
    CHECK(ids[o32] == tok->cls_id());
    const auto s = starts[static_cast<size_t>(r)], e = ends[static_cast<size_t>(r)];
    CHECK(s <= e);
    if (s == 0) continue;
    // The span, decoded, is the answer (lower-cased, as the tokenizer spells it).
    std::vector<int64_t> span(ids.begin() + static_cast<long>(o32 + static_cast<size_t>(s)),
                              ids.begin() + static_cast<long>(o32 + static_cast<size_t>(e) + 1));
    const auto& ex = examples[static_cast<size_t>(f.example_index[static_cast<size_t>(r)])];
    CHECK(span == tok->encode(ex.answer_text));
    CHECK(types[o32 + static_cast<size_t>(s)] == 1);
    answered.insert(f.example_index[static_cast<size_t>(r)]);
  }
  CHECK(answered == std::set<int64_t>{0, 1, 2, 3});
  // With the default sizes each example is one feature.
  CHECK(squad_features(examples, *tok).size() == 4);

  testing::TempDir dir("ipuml_test_squad");
  std::ofstream(dir.file("bad.json")) << R"({"data": [{"paragraphs": [{"context": "abc", "qas": [)"
                                         R"({"question": "q", "answers": [{"text": "abcd", )"
                                         R"("answer_start": 0}]}]}]}]})";
  CHECK_THAT(error_of([&] { read_squad(dir.file("bad.json")); }),
             Catch::Contains("outside the context"));
  std::ofstream(dir.file("trunc.json")) << R"({"data": [)";
  CHECK_THAT(error_of([&] { read_squad(dir.file("trunc.json")); }),
             Catch::Contains("not valid JSON"));
  std::ofstream(dir.file("shape.json")) << R"({"data": [{"title": "x"}]})";
  CHECK_THAT(error_of([&] { read_squad(dir.file("shape.json")); }),
             Catch::Contains("has no 'paragraphs'"));
}
