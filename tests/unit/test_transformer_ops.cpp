// The ops and modules transformers need (issue #15): gradients by finite differences, the errors
// bad calls get, Tensor methods, the fused layer norm's determinism and tracing, attention and
// MultiheadAttention properties, and tied parameters listed (and stepped) once.
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

using namespace ipuml;
using Catch::Matchers::Contains;
using Ts = std::vector<Tensor>;

namespace {

Tensor leaf(const Shape& s, Generator& g, double scale = 1.0) {
  return mul(randn(s, &g), scale).detach().requires_grad_();
}

void require_same(const Tensor& a, const Tensor& b, double tol = 0.0) {
  REQUIRE(a.shape() == b.shape());
  auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  for (size_t i = 0; i < va.size(); ++i) {
    INFO("element " << i);
    if (tol == 0.0)
      REQUIRE(std::memcmp(&va[i], &vb[i], sizeof(float)) == 0);
    else
      REQUIRE(va[i] == Approx(vb[i]).margin(tol).epsilon(tol));
  }
}

void check_grad(const std::string& what, const std::function<Tensor(const Ts&)>& f, Ts in) {
  INFO(what);
  auto r = autograd::gradcheck(f, std::move(in));
  INFO(r.message);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("new ops pass gradcheck", "[ops][transformer][gradcheck]") {
  Generator g(3);
  check_grad("triu", [](const Ts& x) { return triu(x[0], 1); }, {leaf({2, 3, 4}, g)});
  check_grad("tril", [](const Ts& x) { return tril(x[0], -1); }, {leaf({4, 3}, g)});
  check_grad("bmm", [](const Ts& x) { return bmm(x[0], x[1]); },
             {leaf({2, 3, 4}, g), leaf({2, 4, 2}, g)});
  check_grad("baddbmm", [](const Ts& x) { return baddbmm(x[0], x[1], x[2], 0.5, -2.0); },
             {leaf({3, 2}, g), leaf({2, 3, 4}, g), leaf({2, 4, 2}, g)});
  for (const char* eq : {"bhqd,bhkd->bhqk", "ii->i", "bi,bi->b", "i,j->ij", "ij,jk,kl->il"}) {
    Ts in;
    const std::string e = eq;
    if (e == "bhqd,bhkd->bhqk") in = {leaf({1, 2, 3, 4}, g), leaf({1, 2, 2, 4}, g)};
    if (e == "ii->i") in = {leaf({4, 4}, g)};
    if (e == "bi,bi->b") in = {leaf({3, 4}, g), leaf({3, 4}, g)};
    if (e == "i,j->ij") in = {leaf({3}, g), leaf({2}, g)};
    if (e == "ij,jk,kl->il") in = {leaf({2, 3}, g), leaf({3, 2}, g), leaf({2, 3}, g)};
    check_grad(
        std::string("einsum ") + eq, [e](const Ts& x) { return einsum(e, x); }, in);
  }
  const Tensor mask = from_vector<bool>({1, 0, 1, 1, 1, 0, 0, 1, 1}, {3, 3});
  check_grad("sdpa masked",
             [mask](const Ts& x) { return scaled_dot_product_attention(x[0], x[1], x[2], mask); },
             {leaf({2, 3, 4}, g), leaf({2, 3, 4}, g), leaf({2, 3, 2}, g)});
  check_grad("sdpa causal",
             [](const Ts& x) {
               return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true, 0.5);
             },
             {leaf({1, 2, 4, 3}, g), leaf({1, 2, 4, 3}, g), leaf({1, 2, 4, 3}, g)});
  check_grad("layer_norm affine", [](const Ts& x) { return layer_norm(x[0], {6}, x[1], x[2]); },
             {leaf({3, 6}, g, 2.0), leaf({6}, g), leaf({6}, g)});
  check_grad("layer_norm two dims, no affine",
             [](const Ts& x) {
               return layer_norm(x[0], {2, 3}, Tensor(), Tensor(), 1e-3);
             },
             {leaf({2, 2, 3}, g, 2.0)});
  check_grad("layer_norm weight only", [](const Ts& x) { return layer_norm(x[0], {5}, x[1]); },
             {leaf({4, 5}, g, 2.0), leaf({5}, g)});
  for (const char* approx : {"none", "tanh"}) {
    const std::string a = approx;
    check_grad(std::string("gelu ") + approx, [a](const Ts& x) { return gelu(x[0], a); },
               {leaf({3, 5}, g, 2.0)});
  }
  const Tensor target = from_vector<int64_t>({2, -100, 0, 1, -100}, {5});
  const Tensor weight = from_vector<float>({0.5f, 2.0f, 1.5f}, {3});
  check_grad(
      "cross_entropy weight, ignore_index, label_smoothing",
      [&](const Ts& x) { return cross_entropy(x[0], target, Reduction::Mean, 0.2, weight, -100); },
      {leaf({5, 3}, g)});
}

TEST_CASE("bad calls of the new ops throw errors that say what is wrong", "[ops][transformer]") {
  Generator g(4);
  Tensor a = randn({2, 3, 4}, &g), b = randn({2, 4, 5}, &g);
  CHECK_THROWS_WITH(bmm(randn({3, 4}, &g), b), Contains("bmm: batch1 must be a 3-d tensor"));
  CHECK_THROWS_WITH(bmm(a, randn({3, 4, 5}, &g)), Contains("differ in batch size"));
  CHECK_THROWS_WITH(bmm(a, randn({2, 3, 5}, &g)), Contains("inner dims 4 and 3 differ"));
  CHECK_THROWS_WITH(baddbmm(randn({4, 5}, &g), a, b),
                    Contains("baddbmm: input of shape [4, 5] does not broadcast"));
  CHECK_THROWS_WITH(einsum("bij,bjk->bik", {a}), Contains("names 2 operands but 1 tensors"));
  CHECK_THROWS_WITH(einsum("...ij,...jk->...ik", {a, b}), Contains("ellipsis"));
  CHECK_THROWS_WITH(einsum("ij,jk->ik", {a, b}), Contains("'ij,jk->ik' gives operand 0"));
  CHECK_THROWS_WITH(einsum("bij,bkj->bik", {a, b}), Contains("subscript 'j'"));
  CHECK_THROWS_WITH(einsum("bij,bjk->bix", {a, b}), Contains("output subscript 'x'"));
  CHECK_THROWS_WITH(einsum("bij,bjk->bii", {a, b}), Contains("appears more than once"));
  CHECK_THROWS_WITH(einsum("b1j,bjk->bik", {a, b}), Contains("character '1'"));
  CHECK_THROWS_WITH(triu(randn({4}, &g)), Contains("triu: expected a tensor with at least 2"));
  CHECK_THROWS_WITH(tril(randn({4}, &g)), Contains("tril: expected"));

  Tensor logits = randn({4, 3}, &g);
  CHECK_THROWS_WITH(
      cross_entropy(logits, from_vector<int64_t>({0, 1, -1, 2}, {4})),
      Contains("target -1 is out of range for 3 classes") && Contains("ignore_index=-100"));
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector<int64_t>({0, 3, 1, 2}, {4})),
                    Contains("target 3 is out of range"));
  CHECK_THROWS_WITH(
      cross_entropy(logits, from_vector<int64_t>({0, 1, 1, 2}, {4}), Reduction::Mean, 0.0,
                    ones({4})),
      Contains("cross_entropy: weight of shape [4], expected one value per class [3]"));
  CHECK_THROWS_WITH(
      nll_loss(logits, from_vector<int64_t>({0, 1, 1, 2}, {4}), Reduction::Mean, ones({3}, kInt64)),
      Contains("nll_loss: weight is int64"));
  CHECK_THROWS_WITH(nn::CrossEntropyLoss(nn::CrossEntropyLossOptions().weight(ones({3, 1}))),
                    Contains("CrossEntropyLoss: weight must be a 1-d"));

  Tensor q = randn({2, 3, 4}, &g);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, randn({2, 3, 5}, &g), q),
                    Contains("differ in the last dim E"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, q, randn({2, 4, 4}, &g)),
                    Contains("differ in the sequence length S"));
  CHECK_THROWS_WITH(
      scaled_dot_product_attention(q, q, q, from_vector<bool>({1, 1, 1}, {3}), 0.0, true),
      Contains("not both"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, q, q, ones({3, 3}, kInt64)),
                    Contains("attn_mask must be bool or"));
  CHECK_THROWS_WITH(layer_norm(q, {4}, Tensor(), Tensor(), -1.0),
                    Contains("layer_norm: eps must be finite and >= 0"));

  CHECK_THROWS_WITH(nn::MultiheadAttention(10, 3), Contains("divisible by num_heads (3)"));
  nn::MultiheadAttention mha(8, 2);
  Tensor x = randn({5, 2, 8}, &g);
  CHECK_THROWS_WITH(mha(x, x, x, ones({2, 4}, kBool)),
                    Contains("key_padding_mask of shape [2, 4], expected [2, 5]"));
  CHECK_THROWS_WITH(mha(x, x, x, Tensor(), true, ones({5, 4}, kBool)),
                    Contains("2-d attn_mask of shape [5, 4], expected [5, 5]"));
  CHECK_THROWS_WITH(mha(x, x, x, Tensor(), true, ones({3, 5, 5})),
                    Contains("expected [5, 5] or [4, 5, 5]"));
  CHECK_THROWS_WITH(mha(randn({5, 2, 6}, &g), x, x), Contains("embed_dim=8"));
}

TEST_CASE("losses follow PyTorch's ignore_index and weight rules", "[ops][transformer]") {
  Generator g(5);
  Tensor logits = randn({4, 3}, &g);
  Tensor t = from_vector<int64_t>({0, -100, 2, -100}, {4});
  Tensor w = from_vector<float>({2.0f, 1.0f, 0.5f}, {3});
  // Mean divides by the weights of the targets kept: (2 l0 + 0.5 l2) / 2.5.
  auto per = cross_entropy(logits, t, Reduction::None, 0.0, w).to_vector<float>();
  CHECK(per[1] == 0.0f);
  CHECK(per[3] == 0.0f);
  const float mean = cross_entropy(logits, t, Reduction::Mean, 0.0, w).item<float>();
  CHECK(mean == Approx((per[0] + per[2]) / 2.5f).epsilon(1e-6));
  // An ignored row whose stand-in class has log p = -inf still contributes 0, not NaN.
  Tensor masked =
      masked_fill(logits, from_vector<bool>({1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {4, 3}),
                  -std::numeric_limits<double>::infinity());
  Tensor tm = from_vector<int64_t>({-100, 1, 2, 0}, {4});
  Tensor lm = masked.detach().requires_grad_();
  Tensor lossm = cross_entropy(lm, tm);
  CHECK(std::isfinite(lossm.item<float>()));
  lossm.backward();
  for (float v : lm.grad().to_vector<float>()) CHECK(std::isfinite(v));
  // Every target ignored: 0 / 0, as in PyTorch.
  CHECK(std::isnan(cross_entropy(logits, full({4}, -100, kInt64)).item<float>()));
  CHECK(nll_loss(log_softmax(logits, 1), full({4}, -100, kInt64), Reduction::Sum).item<float>() ==
        0.0f);
  // The module forwards its options and keeps the weight as a buffer.
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(w).ignore_index(2));
  CHECK(ce->named_buffers().size() == 1);
  CHECK(ce(logits, from_vector<int64_t>({0, 2, 1, 2}, {4})).item<float>() ==
        cross_entropy(logits, from_vector<int64_t>({0, 2, 1, 2}, {4}), Reduction::Mean, 0.0, w, 2)
            .item<float>());
}

TEST_CASE("Tensor methods give the free functions' results", "[ops][transformer]") {
  Generator g(6);
  Tensor x = randn({2, 3, 4}, &g), y = randn({2, 4, 3}, &g);
  Tensor m = gt(randn({3, 4}, &g), 0.0);
  require_same(x.softmax(-1), softmax(x, -1));
  require_same(x.log_softmax(1), log_softmax(x, 1));
  require_same(x.masked_fill(m, -1e9), masked_fill(x, m, -1e9));
  require_same(x.triu(1), triu(x, 1));
  require_same(x.tril(), tril(x));
  require_same(x.bmm(y), bmm(x, y));
  require_same(randn({2, 3, 3}, &g).baddbmm(x, y, 0.0, 2.0), mul(bmm(x, y), 2.0));
  require_same(x.transpose(1, 2), transpose(x, 1, 2));
  require_same(x.add(x, 2.0), add(x, x, 2.0));
  require_same(x.sub(1.5).mul(2.0).div(x), div(mul(sub(x, 1.5), 2.0), x));
  require_same(x.neg().tanh().sigmoid(), sigmoid(tanh(neg(x))));
  require_same(x.var({2}, 0, true), var(x, {2}, 0, true));
  require_same(x.max(1).first, max(x, 1).first);
  require_same(x.where(m, zeros_like(x)), where(m, x, zeros_like(x)));
  require_same(x.chunk(2, 2)[1], chunk(x, 2, 2)[1]);
  require_same(x.view_as(y), reshape(x, y.shape()));
  // Values of triu/tril.
  Tensor s = reshape(arange(1.0, 10.0), {3, 3});
  CHECK(s.triu().to_vector<float>() == std::vector<float>{1, 2, 3, 0, 5, 6, 0, 0, 9});
  CHECK(s.tril(-1).to_vector<float>() == std::vector<float>{0, 0, 0, 4, 0, 0, 7, 8, 0});
  CHECK(einsum("ii", {s}).item<float>() == 15.0f);
  CHECK(einsum("ij->ji", {s}).to_vector<float>() == transpose(s, 0, 1).to_vector<float>());
}

TEST_CASE("fused layer norm: same bits with 1 or 2 threads, and traced like eager",
          "[ops][transformer][layernorm]") {
  struct Restore {
    ~Restore() { set_num_threads(0); }
  } restore;
  Generator g(7);
  Tensor x = mul(randn({64, 300}, &g), 3.0).detach().requires_grad_();
  Tensor w = randn({300}, &g).requires_grad_(), b = randn({300}, &g).requires_grad_();
  Tensor dy = randn({64, 300}, &g);
  auto run = [&] {
    for (Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
    Tensor y = layer_norm(x, {300}, w, b);
    sum(mul(y, dy)).backward();
    return Ts{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  set_num_threads(1);
  Ts one = run();
  set_num_threads(2);
  Ts two = run();
  for (size_t i = 0; i < one.size(); ++i) require_same(one[i], two[i]);
  // The same numbers as the composite formula.
  Tensor mu = mean(x, {1}, true);
  Tensor ref = add(mul(mul(sub(x, mu), rsqrt(add(var(x, {1}, 0, true), 1e-5))), w), b);
  require_same(one[0], ref.detach(), 1e-5);
  // A traced graph on the CPU executor gives eager's bits.
  ir::Tracer tracer;
  Tensor xi = tracer.input(x.detach(), "x");
  Tensor yi = layer_norm(xi, {300}, w.detach(), b.detach());
  ir::Trace tr = tracer.finish({yi});
  cpu::GraphExecutor exe(tr.graph);
  require_same(exe.run({x.detach()}, tr.states, 0)[0], one[0]);
  // float16 inputs run in float32 and round once.
  Tensor yh =
      layer_norm(x.detach().to(kFloat16), {300}, w.detach().to(kFloat16), b.detach().to(kFloat16));
  CHECK(yh.dtype() == kFloat16);
  require_same(yh.to(kFloat32), one[0], 2e-2);
}

TEST_CASE("scaled_dot_product_attention: masks, causality and dropout",
          "[ops][transformer][attention]") {
  Generator g(8);
  Tensor q = randn({2, 2, 5, 4}, &g), k = randn({2, 2, 5, 4}, &g), v = randn({2, 2, 5, 3}, &g);
  // is_causal equals an explicit lower-triangular bool mask and a -inf float mask.
  Tensor causal = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
  Tensor tri = tril(ones({5, 5})), allowed = gt(tri, 0.0);
  require_same(causal, scaled_dot_product_attention(q, k, v, allowed), 1e-6);
  require_same(
      causal,
      scaled_dot_product_attention(q, k, v, masked_fill(zeros({5, 5}), eq(tri, 0.0), -INFINITY)),
      1e-6);
  // The first query sees only the first key.
  auto c = causal.to_vector<float>(), vv = v.to_vector<float>();
  for (int j = 0; j < 3; ++j)
    CHECK(c[static_cast<size_t>(j)] == Approx(vv[static_cast<size_t>(j)]));
  // Dropout: the same generator seed gives the same result, another seed another one.
  Generator d1(1), d2(1), d3(2);
  Tensor a = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, false, std::nullopt, &d1);
  Tensor b = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, false, std::nullopt, &d2);
  Tensor e = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, false, std::nullopt, &d3);
  require_same(a, b);
  CHECK(a.to_vector<float>() != e.to_vector<float>());
}

TEST_CASE("MultiheadAttention: parameters, paths and modes", "[nn][transformer][attention]") {
  Generator g(9);
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(8, 2).dropout(0.5));
  std::vector<std::string> names;
  for (auto& [k, v] : mha->named_parameters()) names.push_back(k);
  CHECK(names == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                          "out_proj.bias"});
  nn::MultiheadAttention sep(nn::MultiheadAttentionOptions(8, 2).kdim(3).vdim(5).bias(false));
  names.clear();
  for (auto& [k, v] : sep->named_parameters()) names.push_back(k);
  CHECK(names == std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                          "out_proj.weight"});
  CHECK(sep->k_proj_weight.shape() == Shape{8, 3});
  // Biases start at zero (PyTorch's _reset_parameters).
  CHECK(sum(abs(mha->in_proj_bias)).item<float>() == 0.0f);

  mha->eval();
  Tensor x = randn({6, 3, 8}, &g);
  Tensor kpm = from_vector<bool>({0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {3, 6});
  auto [o1, w1] = mha(x, x, x, kpm);
  auto [o2, w2] = mha(x, x, x, kpm, false);
  CHECK_FALSE(w2.defined());
  require_same(o1, o2, 1e-5);  // the weights path and the SDPA path agree
  CHECK(w1.shape() == Shape{3, 6, 6});
  // Padded keys get no weight; rows of weights sum to 1.
  auto wv = w1.to_vector<float>();
  for (int i = 0; i < 6; ++i) {
    CHECK(wv[static_cast<size_t>(i * 6 + 4)] == 0.0f);
    float row = 0;
    for (int j = 0; j < 6; ++j) row += wv[static_cast<size_t>(i * 6 + j)];
    CHECK(row == Approx(1.0f));
  }
  // Evaluation is deterministic; training applies dropout to the weights.
  require_same(std::get<0>(mha(x, x, x)), std::get<0>(mha(x, x, x)));
  mha->train();
  auto [t1, tw] = mha(x, x, x);
  mha->eval();
  CHECK(t1.to_vector<float>() != std::get<0>(mha(x, x, x)).to_vector<float>());
  // is_causal alone (the fused kernel's causal flag) equals the explicit causal mask.
  Tensor causal = gt(triu(ones({6, 6}), 1), 0.0);  // true = may not attend (MHA's convention)
  require_same(std::get<0>(mha(x, x, x, Tensor(), false, Tensor(), true, true)),
               std::get<0>(mha(x, x, x, Tensor(), false, causal)), 1e-5);
  require_same(std::get<0>(mha(x, x, x, Tensor(), true, Tensor(), true, true)),
               std::get<0>(mha(x, x, x, Tensor(), true, causal)), 1e-6);
  // batch_first gives the transposed result of the same module.
  nn::MultiheadAttention bf(nn::MultiheadAttentionOptions(8, 2).batch_first(true));
  bf->load_state_dict(mha->state_dict());
  require_same(std::get<0>(bf(transpose(x, 0, 1), transpose(x, 0, 1), transpose(x, 0, 1))),
               transpose(std::get<0>(mha(x, x, x)), 0, 1), 1e-6);
}

namespace {

// A language model whose head reuses the embedding's weight (GPT-2's tying).
struct TiedLMImpl : nn::Module {
  TiedLMImpl() : Module("TiedLM") {
    wte = register_module("wte", nn::Embedding(10, 4));
    head = register_module("head", nn::Linear(nn::LinearOptions(4, 10).bias(false)));
    head->weight = head->replace_parameter("weight", wte->weight);  // tie
  }
  Tensor forward(const Tensor& ids) override { return head(wte(ids)); }
  nn::Embedding wte{nullptr};
  nn::Linear head{nullptr};
};
IPUML_MODULE(TiedLM);

}  // namespace

TEST_CASE("a tied weight is one parameter and the optimizer steps it once", "[nn][optim][tied]") {
  TiedLM lm;
  auto named = lm->named_parameters();
  REQUIRE(named.size() == 1);
  CHECK(named[0].first == "wte.weight");  // the first name wins, as in PyTorch
  CHECK(lm->parameters().size() == 1);
  auto sd = lm->state_dict();  // PyTorch's state_dict keeps both names
  REQUIRE(sd.size() == 2);
  CHECK(sd[1].first == "head.weight");
  CHECK(sd[0].second.same(sd[1].second));
  CHECK_THROWS_WITH(lm->head->replace_parameter("bias", Tensor()),
                    Contains("Linear: no parameter named 'bias'"));

  optim::SGD sgd(lm->parameters(), optim::SGDOptions(0.1));
  Tensor ids = from_vector<int64_t>({1, 3, 3, 7}, {4});
  Tensor before = lm->wte->weight.clone().detach();
  Tensor loss = cross_entropy(lm(ids), from_vector<int64_t>({3, 7, 1, 1}, {4}));
  loss.backward();
  Tensor grad = lm->wte->weight.grad().clone();
  // The gradient holds both uses: rows never looked up still get the head's share.
  CHECK(sum(abs(grad.select(0, 0))).item<float>() > 0.0f);
  sgd.step();
  require_same(lm->wte->weight.detach(), sub(before, mul(grad, 0.1)), 1e-6);
  CHECK(lm->head->weight.same(lm->wte->weight));
}

namespace {

// softmax(q k^T * scale + bias) v with the primitive ops (what the fused kernel replaces).
Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                           double scale) {
  Tensor s = mul(matmul(q, transpose(k, -2, -1)), scale);
  if (bias.defined()) s = add(s, bias);
  return matmul(softmax(s, -1), v);
}

}  // namespace

TEST_CASE("fused attention matches the composite, forward and backward",
          "[ops][transformer][attention]") {
  Generator g(10);
  // 70 queries and keys: several query and key blocks, and partial ones.
  const int64_t L = 70, S = 70, E = 12, Ev = 5;
  const double inf = std::numeric_limits<double>::infinity();
  Tensor causal_bias = masked_fill(zeros({L, S}), gt(triu(ones({L, S}), 1), 0.0), -inf);
  Tensor bool_mask = gt(rand({2, 1, L, S}, &g), 0.3);  // true = attend
  Tensor bool_bias = where(bool_mask, scalar_tensor(0.0), scalar_tensor(-inf));
  Tensor float_mask = randn({L, S}, &g);
  struct Case {
    const char* name;
    Tensor mask;
    bool causal;
    Tensor ref_bias;
  };
  for (const Case& c :
       {Case{"plain", Tensor(), false, Tensor()}, Case{"causal", Tensor(), true, causal_bias},
        Case{"bool mask", bool_mask, false, bool_bias},
        Case{"float mask", float_mask, false, float_mask}}) {
    INFO(c.name);
    Tensor q = leaf({2, 3, L, E}, g), k = leaf({1, 3, S, E}, g), v = leaf({2, 3, S, Ev}, g);
    Tensor dy = randn({2, 3, L, Ev}, &g);
    Tensor y = scaled_dot_product_attention(q, k, v, c.mask, 0.0, c.causal);
    sum(mul(y, dy)).backward();
    Ts got{y.detach(), q.grad(), k.grad(), v.grad()};
    for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    Tensor r = attention_reference(q, k, v, c.ref_bias, 1.0 / std::sqrt(double(E)));
    sum(mul(r, dy)).backward();
    Ts want{r.detach(), q.grad(), k.grad(), v.grad()};
    for (size_t i = 0; i < got.size(); ++i) require_same(got[i], want[i], 2e-5);
  }
}

TEST_CASE("fused attention: same bits with 1 or 2 threads, traced like eager",
          "[ops][transformer][attention]") {
  struct Restore {
    ~Restore() { set_num_threads(0); }
  } restore;
  Generator g(11);
  Tensor q = leaf({2, 4, 40, 16}, g), k = leaf({2, 4, 90, 16}, g), v = leaf({2, 4, 90, 8}, g);
  Tensor dy = randn({2, 4, 40, 8}, &g);
  auto run = [&] {
    for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
    sum(mul(y, dy)).backward();
    return Ts{y.detach(), q.grad(), k.grad(), v.grad()};
  };
  set_num_threads(1);
  Ts one = run();
  set_num_threads(2);
  Ts two = run();
  for (size_t i = 0; i < one.size(); ++i) require_same(one[i], two[i]);
  ir::Tracer tracer;
  Tensor qi = tracer.input(q.detach(), "q");
  Tensor yi = scaled_dot_product_attention(qi, k.detach(), v.detach(), Tensor(), 0.0, true);
  ir::Trace tr = tracer.finish({yi});
  int fused = 0;
  for (auto& n : tr.graph.nodes) fused += n.kind == ir::OpKind::Attention;
  CHECK(fused == 1);
  cpu::GraphExecutor exe(tr.graph);
  require_same(exe.run({q.detach()}, tr.states, 0)[0], one[0]);
}

// Not run by default: `ipuml_tests "[.bench]"` prints the fused kernel's speed against the
// composite on a GPT-2-small-sized attention (batch 1, 12 heads, 256 tokens, head dim 64).
TEST_CASE("fused attention speed against the composite", "[.bench][attention]") {
  Generator g(12);
  const int64_t H = 12, L = 256, E = 64;
  Tensor q = leaf({1, H, L, E}, g), k = leaf({1, H, L, E}, g), v = leaf({1, H, L, E}, g);
  Tensor dy = randn({1, H, L, E}, &g);
  const double inf = std::numeric_limits<double>::infinity();
  Tensor causal_bias = masked_fill(zeros({L, L}), gt(triu(ones({L, L}), 1), 0.0), -inf);
  auto time = [&](const std::function<Tensor()>& f) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
      auto t0 = std::chrono::steady_clock::now();
      sum(mul(f(), dy)).backward();
      best = std::min(
          best,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  const double fused = time([&] { return scaled_dot_product_attention(q, k, v, {}, 0.0, true); });
  const double comp =
      time([&] { return attention_reference(q, k, v, causal_bias, 1.0 / std::sqrt(64.0)); });
  WARN("causal attention fwd+bwd [1, 12, 256, 64]: fused " << fused << " ms, composite " << comp
                                                           << " ms");
  CHECK(fused > 0);
  // Layer norm over GPT-2 small's rows (512 tokens x 768): the fused ops against the formula.
  Tensor x = leaf({512, 768}, g), w = leaf({768}, g), b = leaf({768}, g);
  Tensor dx = randn({512, 768}, &g);
  auto time_ln = [&](const std::function<Tensor()>& f) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      for (Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
      auto t0 = std::chrono::steady_clock::now();
      sum(mul(f(), dx)).backward();
      best = std::min(
          best,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  const double ln_fused = time_ln([&] { return layer_norm(x, {768}, w, b); });
  const double ln_comp = time_ln([&] {
    Tensor mu = mean(x, {1}, true);
    return add(mul(mul(sub(x, mu), rsqrt(add(var(x, {1}, 0, true), 1e-5))), w), b);
  });
  WARN("layer norm fwd+bwd [512, 768]: fused " << ln_fused << " ms, composite " << ln_comp
                                               << " ms");
  CHECK(ln_fused > 0);
}
