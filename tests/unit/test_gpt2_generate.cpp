// GPT-2's KV-cache path: logits of cached incremental decoding equal full recomputation's, and
// generation with and without the cache picks the same tokens; the serialized LM head gives
// the same logits as the single product.
#include <ipuml/ipuml.hpp>
#include <ipuml/models/gpt2.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace ipuml;
using namespace ipuml::models;

namespace {

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.contiguous().to_vector<float>(), y = b.contiguous().to_vector<float>();
  REQUIRE(x.size() == y.size());
  float m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace

TEST_CASE("GPT-2: cached forward equals the full forward", "[gpt2][generate]") {
  manual_seed(3);
  GPT2LMHeadModel m(GPT2Config::tiny().dropout(0.0));
  m->eval();
  NoGradGuard ng;
  const Tensor ids = randint(0, 1000, {2, 9});
  const Tensor full_logits = m(ids);
  GPT2KVCache cache;
  // 5 positions at once, then one at a time.
  std::vector<Tensor> parts{m->forward_cached(slice(ids, 1, 0, 5).contiguous(), cache)};
  CHECK(cache.length() == 5);
  for (int64_t t = 5; t < 9; ++t)
    parts.push_back(m->forward_cached(slice(ids, 1, t, t + 1).contiguous(), cache));
  CHECK(cache.length() == 9);
  CHECK(max_abs_diff(cat(parts, 1), full_logits) < 1e-5f);
  GPT2KVCache too_long;
  CHECK_THROWS_WITH(m->forward_cached(randint(0, 1000, {1, 129}), too_long),
                    Catch::Contains("n_positions=128"));
}

TEST_CASE("GPT-2: generation with the KV cache equals full recomputation", "[gpt2][generate]") {
  manual_seed(4);
  GPT2LMHeadModel m(GPT2Config::tiny());
  const std::vector<int64_t> prompt{5, 17, 300, 2};
  for (double temperature : {0.0, 0.8}) {
    auto o = GPT2GenerateOptions()
                 .max_new_tokens(12)
                 .temperature(temperature)
                 .top_k(50)
                 .top_p(0.9)
                 .seed(7);
    std::vector<Tensor> cached_logits, full_logits;
    const auto a = generate(m, prompt, o, &cached_logits);
    const auto b = generate(m, prompt, GPT2GenerateOptions(o).use_cache(false), &full_logits);
    CHECK(a == b);
    REQUIRE(cached_logits.size() == 12);
    REQUIRE(full_logits.size() == 12);
    for (size_t i = 0; i < 12; ++i) CHECK(max_abs_diff(cached_logits[i], full_logits[i]) < 1e-5f);
    // Same seed, same tokens.
    CHECK(generate(m, prompt, o) == a);
  }
  CHECK(m->is_training());  // generate() restores the mode
  // Greedy picks the argmax of each step's logits.
  std::vector<Tensor> logits;
  const auto g =
      generate(m, prompt, GPT2GenerateOptions().max_new_tokens(3).temperature(0), &logits);
  for (size_t i = 0; i < 3; ++i) CHECK(argmax(logits[i]).item<int64_t>() == g[i]);
  CHECK_THROWS_WITH(generate(m, {}, GPT2GenerateOptions()), Catch::Contains("no tokens"));
  CHECK_THROWS_WITH(generate(m, {1000}, GPT2GenerateOptions()), Catch::Contains("outside"));
  // Beyond n_positions the context is cut to its last n_positions tokens.
  const auto longer = generate(m, std::vector<int64_t>(126, 1),
                               GPT2GenerateOptions().max_new_tokens(5).temperature(0));
  CHECK(longer.size() == 5);
}

TEST_CASE("GPT-2: embedding serialization factor gives the same logits and gradients",
          "[gpt2][generate]") {
  manual_seed(5);
  GPT2LMHeadModel one(GPT2Config::tiny().dropout(0.0));
  manual_seed(5);
  GPT2LMHeadModel three(GPT2Config::tiny().dropout(0.0).embedding_serialization_factor(3));
  // Ids at both ends of every slice of the vocabulary (334, 334, 332 rows), and random ones.
  Tensor ids = cat({tensor({{0, 333, 334, 667, 668, 999}}), randint(0, 1000, {1, 6})}, 0);
  const Tensor a = one(ids), b = three(ids);
  CHECK(max_abs_diff(a, b) < 1e-5f);
  // The lookup is done in slices too: the same gradient reaches every row of the tied weight.
  sum(mul(a, a)).backward();
  sum(mul(b, b)).backward();
  const Tensor& ga = one->transformer->wte->weight.grad();
  const Tensor& gb = three->transformer->wte->weight.grad();
  REQUIRE(gb.defined());
  CHECK(max_abs_diff(ga, gb) < 1e-4f * std::max(1.0f, amax(abs(ga)).item<float>()));
  // Rows of ids that occur get gradient from the lookup as well as from the head.
  CHECK(abs(gb.select(0, 333)).sum().item<float>() > 0);
  CHECK_THROWS_WITH(three(tensor({{0, 1000}})), Catch::Contains("token ids must be in [0, 1000)"));
  CHECK_THROWS_WITH(GPT2LMHeadModel(GPT2Config::tiny().embedding_serialization_factor(0)),
                    Catch::Contains("embedding_serialization_factor"));
}
