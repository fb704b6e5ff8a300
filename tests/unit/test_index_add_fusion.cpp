// The CPU executor's index_add fusion: an Add of an IndexAdd's result (autograd's gradient of an
// embedding or of slices) and a value only the Add reads runs as one in-place accumulation, with
// the bits of the two ops; and run_index_add_onto against IndexAdd followed by Add.
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

#include "../support/fusion_switch.hpp"

#include <bit>
#include <cstdlib>
#include <string>

using namespace ipuml;

namespace {

using ipuml::testing::run_with_fusion;

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> b;
  for (float v : t.to_vector<float>()) b.push_back(std::bit_cast<uint32_t>(v));
  return b;
}

int fused_adds(const ir::Graph& g) {
  const auto f = cpu::fuse_index_add_into_add(g);
  int n = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (f.index_add_node[i] < 0) continue;
    ++n;
    CHECK(g.nodes[i].kind == ir::OpKind::Add);
    CHECK(g.nodes[size_t(f.index_add_node[i])].kind == ir::OpKind::IndexAdd);
    CHECK(f.runs_at[size_t(f.index_add_node[i])] == int64_t(i));
  }
  return n;
}

// Tokens with repeats (the order of a destination's contributions matters) and a tied head: the
// table's gradient is the head's product plus the embedding's index_add.
struct TiedEmbeddingStep {
  ir::Trace trace;
  Tensor w;
  TiedEmbeddingStep(int64_t vocab, int64_t rows) {
    Generator gen(5);
    w = mul(randn({vocab, 8}, &gen), 0.5).requires_grad_();
    ir::Tracer tracer;
    Tensor tokens = tracer.input(ir::TensorMeta{{rows}, kInt64}, "tokens");
    Tensor target = tracer.input(ir::TensorMeta{{rows}, kInt64}, "target");
    Tensor h = tanh(embedding(w, tokens));
    Tensor loss = cross_entropy(matmul(h, w.t()), target);
    loss.backward();
    trace = tracer.finish({loss, w.grad()});
  }
};

}  // namespace

TEST_CASE("a tied embedding's gradient adds its index_add in place with the same bits",
          "[graph][fusion]") {
  for (int64_t vocab : {int64_t(7), int64_t(300)}) {
    CAPTURE(vocab);
    TiedEmbeddingStep step(vocab, 24);
    CHECK(fused_adds(step.trace.graph) == 1);
    Generator gen(8);
    // Few distinct tokens: most destinations receive several contributions.
    Tensor tokens = randint(0, std::min<int64_t>(vocab, 5), {24}, &gen);
    Tensor target = randint(0, vocab, {24}, &gen);
    const auto a = run_with_fusion(step.trace, true, {tokens, target});
    const auto b = run_with_fusion(step.trace, false, {tokens, target});
    CHECK(bits(a[0]) == bits(b[0]));
    CHECK(bits(a[1]) == bits(b[1]));
    // Against eager autograd (its own op order).
    Tensor w = step.w.detach().clone().requires_grad_();
    cross_entropy(matmul(tanh(embedding(w, tokens)), w.t()), target).backward();
    const auto want = w.grad().to_vector<float>(), got = a[1].to_vector<float>();
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-6));
  }
}

TEST_CASE("a gradient made of three slices' gradients fuses link by link with the same bits",
          "[graph][fusion]") {
  Generator gen(3);
  Tensor w = mul(randn({6, 12}, &gen), 0.5).requires_grad_();
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{5, 6}, kFloat32}, "x");
  auto qkv = chunk(matmul(x, w), 3, 1);  // as attention splits its fused projection
  Tensor loss = sum(add(mul(qkv[0], qkv[1]), tanh(qkv[2])));
  loss.backward();
  auto trace = tracer.finish({loss, w.grad()});
  CHECK(fused_adds(trace.graph) == 2);
  Tensor xv = randn({5, 6}, &gen);
  const auto a = run_with_fusion(trace, true, {xv});
  const auto b = run_with_fusion(trace, false, {xv});
  CHECK(bits(a[0]) == bits(b[0]));
  CHECK(bits(a[1]) == bits(b[1]));
  Tensor we = w.detach().clone().requires_grad_();
  auto e = chunk(matmul(xv, we), 3, 1);
  sum(add(mul(e[0], e[1]), tanh(e[2]))).backward();
  const auto want = we.grad().to_vector<float>(), got = a[1].to_vector<float>();
  for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-5));
}

namespace {

Tensor index_add_op(const Tensor& index, const Tensor& src, const Shape& shape, int64_t dim) {
  ir::Attrs a;
  a.dims = {dim};
  a.shape = shape;
  return detail::dispatch1(ir::OpKind::IndexAdd, a, {index, src});
}

}  // namespace

TEST_CASE("an Add of an index_add fuses only when nothing else sees the operands",
          "[graph][fusion]") {
  Generator gen(4);
  const Tensor xv = randn({4, 3}, &gen), sv = randn({5, 3}, &gen);
  const Tensor idx = from_vector<int64_t>({2, 0, 2, 1, 2}, {5});
  Tensor state = randn({5, 3}, &gen);
  struct Case {
    const char* what;
    int fused;
  };
  const Case cases[] = {{"plain", 1},
                        {"the operand is a result", 0},
                        {"the index_add is a result", 0},
                        {"the operand is read again", 0},
                        {"the operand is a graph input", 0},
                        {"the source is a state", 0},
                        {"the operand is a reshape", 0},
                        {"the add broadcasts", 0}};
  for (int v = 0; v < 8; ++v) {
    CAPTURE(cases[v].what);
    ir::Tracer tracer;
    Tensor x = tracer.input(xv, "x");
    Tensor s = tracer.input(sv, "s");
    Tensor i = tracer.input(idx, "i");
    Tensor b = index_add_op(i, v == 5 ? state : s, {4, 3}, 0);
    Tensor a = v == 4 ? x : v == 6 ? reshape(exp(reshape(x, {3, 4})), {4, 3}) : exp(x);
    Tensor y = v == 7 ? add(slice(b, 0, 0, 1), a) : add(a, b);
    std::vector<Tensor> outs{y};
    if (v == 1) outs.push_back(a);
    if (v == 2) outs.push_back(b);
    if (v == 3) outs.push_back(sum(a));
    auto trace = tracer.finish(outs);
    CHECK(fused_adds(trace.graph) == cases[v].fused);
    const auto on = run_with_fusion(trace, true, {xv, sv, idx});
    const auto off = run_with_fusion(trace, false, {xv, sv, idx});
    for (size_t k = 0; k < on.size(); ++k) CHECK(bits(on[k]) == bits(off[k]));
    if (v == 0) {  // against an independent computation, in double
      const auto xs = xv.to_vector<float>(), ss = sv.to_vector<float>();
      const auto got = on[0].to_vector<float>();
      const int64_t rows[] = {2, 0, 2, 1, 2};
      std::vector<double> want(12);
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 3; ++c)
          want[size_t(r * 3 + c)] = std::exp(double(xs[size_t(r * 3 + c)]));
      for (int j = 0; j < 5; ++j)
        for (int c = 0; c < 3; ++c) want[size_t(rows[j] * 3 + c)] += ss[size_t(j * 3 + c)];
      for (size_t k = 0; k < 12; ++k) CHECK(got[k] == Approx(want[k]).margin(1e-5));
    }
  }
}

namespace {

// out = a + index_add(idx, src) by the two kernels, and by run_index_add_onto in place.
struct OntoCase {
  Shape shape;
  int64_t dim;
  std::vector<int64_t> index;
};

std::vector<float> two_ops(const OntoCase& c, const std::vector<float>& a,
                           const std::vector<float>& src) {
  ir::Attrs at;
  at.dims = {c.dim};
  at.shape = c.shape;
  Shape ss = c.shape;
  ss[size_t(c.dim)] = int64_t(c.index.size());
  std::vector<float> b(a.size()), out(a.size());
  cpu::run_kernel(
      ir::OpKind::IndexAdd, at,
      {{c.index.data(), {{int64_t(c.index.size())}, kInt64}}, {src.data(), {ss, kFloat32}}},
      {{b.data(), {c.shape, kFloat32}}});
  cpu::run_kernel(ir::OpKind::Add, {},
                  {{a.data(), {c.shape, kFloat32}}, {b.data(), {c.shape, kFloat32}}},
                  {{out.data(), {c.shape, kFloat32}}});
  return out;
}

std::vector<float> onto(const OntoCase& c, std::vector<float> a, const std::vector<float>& src) {
  ir::Attrs at;
  at.dims = {c.dim};
  at.shape = c.shape;
  Shape ss = c.shape;
  ss[size_t(c.dim)] = int64_t(c.index.size());
  cpu::run_index_add_onto(at, {c.index.data(), {{int64_t(c.index.size())}, kInt64}},
                          {src.data(), {ss, kFloat32}}, {a.data(), {c.shape, kFloat32}});
  return a;
}

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b;
  for (float x : v) b.push_back(std::bit_cast<uint32_t>(x));
  return b;
}

}  // namespace

TEST_CASE("run_index_add_onto has the bits of IndexAdd then Add", "[cpu][fusion]") {
  const OntoCase cases[] = {
      {{9, 5}, 0, {3, 3, 8, 0, 3, 7, 8}},  // repeats, rows of 5
      {{9, 300}, 0, {4, 1, 4, 4, 2, 1}},   // rows wider than one column block
      {{6, 10, 4}, 1, {9, 2, 2, 5}},       // a middle dim
      {{7, 2304}, 1, {}},                  // filled below: a slice's range
      {{3, 5, 7}, 2, {6, 0, 6, 1}},        // the last dim, inner of 1
      {{50, 16}, 0, {}},                   // no index at all
  };
  Generator gen(21);
  for (auto c : cases) {
    if (c.shape == Shape{7, 2304})
      for (int64_t j = 768; j < 1536; ++j) c.index.push_back(j);
    CAPTURE(shape_str(c.shape), c.dim, c.index.size());
    int64_t n = 1;
    for (auto d : c.shape) n *= d;
    const int64_t ns = n / c.shape[size_t(c.dim)] * int64_t(c.index.size());
    // Magnitudes apart, so the order of a destination's contributions shows in the bits.
    auto a = mul(randn({n}, &gen), 1e3).to_vector<float>();
    auto src = randn({std::max<int64_t>(ns, 1)}, &gen).to_vector<float>();
    src.resize(size_t(ns));
    for (size_t k = 0; k < src.size(); k += 3) src[k] *= 1e-4f;
    if (!src.empty()) src[0] = -0.0f;  // a -0 contribution counts as +0, as in index_add
    CHECK(bits_of(onto(c, a, src)) == bits_of(two_ops(c, a, src)));
  }
}

TEST_CASE("run_index_add_onto keeps a -0 the index does not reach and rejects bad input",
          "[cpu][fusion]") {
  const OntoCase c{{3, 2}, 0, {1}};
  std::vector<float> a{-0.0f, 1.0f, -0.0f, -0.0f, 2.0f, 3.0f}, src{-0.0f, 5.0f};
  const auto got = onto(c, a, src);
  const auto ref = two_ops(c, a, src);
  // Row 1: the bits of the Add (-0 + (0 + -0) = +0); row 0: -0 kept, where the Add gives +0
  // (an equal value).
  CHECK(std::bit_cast<uint32_t>(got[2]) == std::bit_cast<uint32_t>(ref[2]));
  CHECK(std::bit_cast<uint32_t>(got[2]) == 0u);
  CHECK(got[3] == 5.0f);
  CHECK(std::bit_cast<uint32_t>(got[0]) == 0x80000000u);
  CHECK(got[0] == ref[0]);

  ir::Attrs at;
  at.dims = {0};
  at.shape = {3, 2};
  const std::vector<int64_t> bad{3};
  std::vector<float> out = a;
  REQUIRE_THROWS_WITH(
      cpu::run_index_add_onto(at, {bad.data(), {{1}, kInt64}}, {src.data(), {{1, 2}, kFloat32}},
                              {out.data(), {{3, 2}, kFloat32}}),
      Catch::Contains("index 3 is out of range"));
  CHECK(bits_of(out) == bits_of(a));  // nothing written
  at.shape = {4, 2};
  REQUIRE_THROWS_WITH(
      cpu::run_index_add_onto(at, {c.index.data(), {{1}, kInt64}}, {src.data(), {{1, 2}, kFloat32}},
                              {out.data(), {{3, 2}, kFloat32}}),
      Catch::Contains("result shape"));
  at.shape = {3, 2};
  REQUIRE_THROWS_WITH(cpu::run_index_add_onto(at, {c.index.data(), {{1}, kInt64}},
                                              {out.data() + 2, {{1, 2}, kFloat32}},
                                              {out.data(), {{3, 2}, kFloat32}}),
                      Catch::Contains("must not overlap"));
  CHECK(bits_of(out) == bits_of(a));
}
