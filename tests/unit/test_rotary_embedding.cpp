// F::rotary_embedding: values against a per-element loop of the definition for both pairings,
// the properties generation relies on (an offset continues a longer sequence; scores depend on
// relative positions only), gradients by finite differences, half precision against float32,
// and the errors bad options get. (PyTorch's values and gradients, written as HF's GPT-J and
// GPT-NeoX apply them: test_ops_golden.cpp.)
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

using namespace ipuml;
using Catch::Matchers::Contains;
using Ts = std::vector<Tensor>;
namespace F = ipuml::nn::functional;

namespace {

// The definition, element by element in double: feature f < r of the row at position p along
// seq_dim pairs with f ^ 1 (interleaved) or f +- r/2 (halves) and turns by p * base^(-2j/r).
std::vector<double> naive(const Tensor& x, int64_t r, int64_t offset, int64_t seq_dim, double base,
                          nn::RotaryStyle style) {
  const auto v = x.to_vector<double>();
  const Shape& s = x.shape();
  const int64_t d = s.back();
  int64_t inner = 1;  // elements per step along seq_dim
  for (size_t k = static_cast<size_t>(seq_dim) + 1; k < s.size(); ++k) inner *= s[k];
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t f = static_cast<int64_t>(i) % d;
    const int64_t pos =
        offset + (static_cast<int64_t>(i) / inner) % s[static_cast<size_t>(seq_dim)];
    if (f >= r) {
      out[i] = v[i];
      continue;
    }
    const bool interleaved = style == nn::RotaryStyle::Interleaved;
    const int64_t j = interleaved ? f / 2 : f % (r / 2);
    const bool first = interleaved ? f % 2 == 0 : f < r / 2;
    const int64_t partner = interleaved ? (first ? f + 1 : f - 1) : (first ? f + r / 2 : f - r / 2);
    const double angle = static_cast<double>(pos) *
                         std::pow(base, -2.0 * static_cast<double>(j) / static_cast<double>(r));
    const double other = v[i - static_cast<size_t>(f) + static_cast<size_t>(partner)];
    out[i] = v[i] * std::cos(angle) + (first ? -other : other) * std::sin(angle);
  }
  return out;
}

void require_near(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).margin(tol).epsilon(tol));
  }
}

F::RotaryEmbeddingFuncOptions opts(int64_t r, int64_t offset, int64_t seq_dim,
                                   nn::RotaryStyle style) {
  return F::RotaryEmbeddingFuncOptions().rotary_dim(r).offset(offset).seq_dim(seq_dim).style(style);
}

}  // namespace

TEST_CASE("rotary_embedding gives the definition's values for both pairings", "[ops][rotary]") {
  Generator g(41);
  struct Case {
    Shape shape;
    int64_t r, offset, seq_dim;
    double base;
  };
  for (auto style : {nn::RotaryStyle::Interleaved, nn::RotaryStyle::Half}) {
    for (const Case& c : {Case{{2, 5, 3, 8}, 8, 0, 1, 10000.0},      // [b, s, h, d], all rotate
                          Case{{1, 4, 2, 16}, 4, 9, 1, 10000.0},     // GPT-J 6B's 1/4
                          Case{{2, 3, 6, 10}, 6, 3, 2, 10000.0},     // [b, h, s, d]
                          Case{{3, 7, 4}, 2, 100, 1, 500.0},         // one head, another base
                          Case{{6, 4}, 4, 1000, 0, 10000.0},         // seq first
                          Case{{1, 2, 3, 8}, 8, 5, -3, 10000.0}}) {  // seq_dim from the end
      INFO("shape " << shape_str(c.shape) << " rotary_dim " << c.r << " offset " << c.offset
                    << (style == nn::RotaryStyle::Half ? " halves" : " interleaved"));
      const Tensor x = randn(c.shape, &g);
      const Tensor y = F::rotary_embedding(x, opts(c.r, c.offset, c.seq_dim, style).base(c.base));
      REQUIRE(y.shape() == x.shape());
      const int64_t seq = c.seq_dim < 0 ? c.seq_dim + x.dim() : c.seq_dim;
      require_near(y.to_vector<double>(), naive(x, c.r, c.offset, seq, c.base, style), 2e-6,
                   "values");
    }
  }
  // rotary_dim defaults to the whole head, the style to GPT-J's, the layout to [b, s, h, d].
  const Tensor x = randn({2, 3, 2, 6}, &g);
  require_near(F::rotary_embedding(x).to_vector<double>(),
               naive(x, 6, 0, 1, 10000.0, nn::RotaryStyle::Interleaved), 2e-6, "defaults");
}

TEST_CASE("rotary_embedding with an offset continues a longer sequence", "[ops][rotary]") {
  // Generation with a cache: rotating positions [k, k + n) alone gives the rows a full rotation
  // of [0, k + n) gives them; and rotated queries and keys score by relative position only.
  Generator g(42);
  for (auto style : {nn::RotaryStyle::Interleaved, nn::RotaryStyle::Half}) {
    const Tensor x = randn({2, 9, 3, 8}, &g);
    const Tensor full = F::rotary_embedding(x, opts(4, 0, 1, style));
    const Tensor tail = F::rotary_embedding(x.slice(1, 6, 9), opts(4, 6, 1, style));
    require_near(tail.to_vector<double>(), full.slice(1, 6, 9).to_vector<double>(), 1e-6, "tail");
    // Position 0 is the identity.
    require_near(full.slice(1, 0, 1).to_vector<double>(), x.slice(1, 0, 1).to_vector<double>(), 0,
                 "position 0");

    const Tensor q = randn({1, 1, 1, 8}, &g), k = randn({1, 1, 1, 8}, &g);
    auto score = [&](int64_t m, int64_t n) {
      const Tensor qm = F::rotary_embedding(q, opts(8, m, 1, style));
      const Tensor kn = F::rotary_embedding(k, opts(8, n, 1, style));
      return static_cast<double>(sum(mul(qm, kn)).item<float>());
    };
    CHECK(score(7, 3) == Approx(score(104, 100)).epsilon(1e-5).margin(1e-5));
    CHECK(score(3, 7) == Approx(score(0, 4)).epsilon(1e-5).margin(1e-5));
    CHECK(score(3, 7) != Approx(score(7, 3)).epsilon(1e-3));
  }
}

TEST_CASE("rotary_embedding passes gradcheck", "[ops][rotary][gradcheck]") {
  Generator g(43);
  for (auto style : {nn::RotaryStyle::Interleaved, nn::RotaryStyle::Half}) {
    INFO((style == nn::RotaryStyle::Half ? "halves" : "interleaved"));
    struct Case {
      Shape shape;
      int64_t r, offset, seq_dim;
    };
    for (const Case& c : {Case{{2, 3, 2, 8}, 4, 5, 1}, Case{{1, 2, 4, 6}, 6, 0, 2}}) {
      INFO("shape " << shape_str(c.shape));
      const Tensor x = randn(c.shape, &g).requires_grad_();
      const auto o = opts(c.r, c.offset, c.seq_dim, style);
      const auto res =
          autograd::gradcheck([&](const Ts& v) { return F::rotary_embedding(v[0], o); }, {x});
      INFO(res.message);
      CHECK(res.ok);
    }
  }
}

TEST_CASE("rotary_embedding in float16 and bfloat16 is close to float32", "[ops][rotary][half]") {
  Generator g(44);
  const Tensor x = randn({2, 6, 4, 32}, &g);
  for (auto style : {nn::RotaryStyle::Interleaved, nn::RotaryStyle::Half}) {
    const auto o = opts(16, 2040, 1, style);
    const Tensor ref = F::rotary_embedding(x, o);
    for (auto [dt, tol] : {std::pair{kFloat16, 4e-3}, std::pair{kBFloat16, 3e-2}}) {
      INFO(dtype_name(dt) << (style == nn::RotaryStyle::Half ? " halves" : " interleaved"));
      const Tensor xh = x.to(dt).requires_grad_();
      const Tensor y = F::rotary_embedding(xh, o);
      REQUIRE(y.dtype() == dt);
      const double err =
          amax(abs(sub(y.to(kFloat32), ref))).item<float>() / amax(abs(ref)).item<float>();
      INFO("max error " << err << " of the largest output");
      CHECK(err < tol);
      // The pass-through features are x's, bit for bit.
      CHECK(y.slice(3, 16, 32).to(kFloat32).to_vector<float>() ==
            xh.detach().slice(3, 16, 32).to(kFloat32).to_vector<float>());
      sum(y).backward();
      CHECK(xh.grad().dtype() == dt);
    }
  }
}

TEST_CASE("rotary_embedding rejects bad options naming them", "[ops][rotary][errors]") {
  const Tensor x = randn({1, 3, 2, 8});
  auto with = [&](const F::RotaryEmbeddingFuncOptions& o) { return F::rotary_embedding(x, o); };
  CHECK_THROWS_WITH(with(F::RotaryEmbeddingFuncOptions().rotary_dim(5)),
                    Contains("rotary_embedding: rotary_dim must be even, positive and at most "
                             "head_dim=8, got 5"));
  CHECK_THROWS_WITH(with(F::RotaryEmbeddingFuncOptions().rotary_dim(10)),
                    Contains("at most head_dim=8, got 10"));
  CHECK_THROWS_WITH(with(F::RotaryEmbeddingFuncOptions().rotary_dim(0)),
                    Contains("rotary_dim must be even, positive"));
  CHECK_THROWS_WITH(with(F::RotaryEmbeddingFuncOptions().seq_dim(3)),
                    Contains("seq_dim=3 is the feature dim (the last one)"));
  CHECK_THROWS_WITH(with(F::RotaryEmbeddingFuncOptions().seq_dim(-1)),
                    Contains("seq_dim=-1 is the feature dim"));
  CHECK_THROWS_WITH(with(F::RotaryEmbeddingFuncOptions().seq_dim(4)),
                    Contains("seq_dim=4 is out of range for an input of shape [1, 3, 2, 8]"));
  CHECK_THROWS_WITH(with(F::RotaryEmbeddingFuncOptions().offset(-1)),
                    Contains("offset must be non-negative, got -1"));
  CHECK_THROWS_WITH(with(F::RotaryEmbeddingFuncOptions().base(0.0)),
                    Contains("base must be positive"));
  CHECK_THROWS_WITH(F::rotary_embedding(randn({8})),
                    Contains("expected an input with a sequence dim and a feature (last) dim"));
  CHECK_THROWS_WITH(F::rotary_embedding(randint(0, 4, {2, 4})),
                    Contains("expected a floating-point input, got int64"));
}

TEST_CASE("rotary_embedding with position_ids rotates each row by its own position",
          "[ops][rotary]") {
  Generator g(43);
  for (const int64_t seq_dim : {1, 2}) {
    INFO("seq_dim " << seq_dim);
    // [2, 5, 3, 8] with the sequence on dim 1, or [2, 3, 5, 8] on dim 2.
    const Tensor x = seq_dim == 1 ? randn({2, 5, 3, 8}, &g) : randn({2, 3, 5, 8}, &g);
    auto with = [&](int64_t offset, const Tensor& ids) {
      auto o = opts(4, offset, seq_dim, nn::RotaryStyle::Interleaved);
      if (ids.defined()) o.position_ids(ids);
      return F::rotary_embedding(x, o);
    };
    // [seq] positions equal the offset form exactly.
    CHECK(with(0, from_vector(std::vector<int64_t>{6, 7, 8, 9, 10}, {5})).to_vector<float>() ==
          with(6, Tensor()).to_vector<float>());
    // [batch, seq]: row b of the batch as if rotated alone from its own first position.
    std::vector<int64_t> ids;
    for (int64_t b : {0, 1})
      for (int64_t p = 0; p < 5; ++p) ids.push_back((b == 0 ? 3 : 40) + p);
    const Tensor both = with(0, from_vector(ids, {2, 5}));
    for (int64_t b : {0, 1}) {
      const Tensor alone = F::rotary_embedding(
          x.slice(0, b, b + 1), opts(4, b == 0 ? 3 : 40, seq_dim, nn::RotaryStyle::Interleaved));
      CHECK(both.slice(0, b, b + 1).to_vector<float>() == alone.to_vector<float>());
    }
  }
  const Tensor x = randn({2, 5, 3, 8}, &g);
  auto refused = [&](int64_t offset, const Tensor& ids) {
    try {
      F::rotary_embedding(x, opts(4, offset, 1, nn::RotaryStyle::Interleaved).position_ids(ids));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(refused(2, arange(5)), Catch::Contains("give position_ids or offset, not both"));
  CHECK_THAT(refused(0, arange(4)), Catch::Contains("position_ids must be [seq] or [batch, seq]"));
  CHECK_THAT(refused(0, zeros({3, 5}, kInt64)), Catch::Contains("[batch, seq] = [2, 5]"));
  CHECK_THAT(refused(0, zeros({5})), Catch::Contains("position_ids must be int64"));
  CHECK_THAT(refused(0, from_vector(std::vector<int64_t>{0, 1, -2, 3, 4}, {5})),
             Catch::Contains("must be non-negative, got -2"));
}
