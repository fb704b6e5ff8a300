// The IPU emulator gives the CPU executor's numbers: every op family traced into small graphs
// (forward and backward), training steps of an MLP and a CNN, and bit-identical results with 1
// and 2 threads.
#include <cstring>
#include <sstream>
#include <functional>

#include <catch2/catch.hpp>

#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/ipuml.hpp>

using namespace ipuml;
using Ts = std::vector<Tensor>;

namespace {

struct RestoreThreads {
  ~RestoreThreads() { set_num_threads(0); }
};

// Element-by-element comparison: floats within 1e-5 relative, everything else exact.
// Returns how many float elements differ in any bit.
size_t compare(const Tensor& cpu_t, const Tensor& ipu_t, const std::string& what) {
  INFO(what);
  REQUIRE(cpu_t.shape() == ipu_t.shape());
  REQUIRE(cpu_t.dtype() == ipu_t.dtype());
  if (cpu_t.dtype() == kFloat16 || cpu_t.dtype() == kBFloat16) {
    // Half results: a K split adds its float partial sums in another order before rounding,
    // so an element may land one ulp away (2^-10 relative in float16, 2^-7 in bfloat16), and
    // an op that reads it (softmax of a matmul) two (docs/precision.md).
    const double ulp = 2 * (cpu_t.dtype() == kFloat16 ? 0.0009765625 : 0.0078125);
    auto a = cpu_t.to(kFloat32).to_vector<float>();
    auto b = ipu_t.to(kFloat32).to_vector<float>();
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("element " << i);
      REQUIRE(std::isfinite(a[i]));  // the case keeps its values in the half range
      differ += a[i] != b[i];
      REQUIRE(b[i] == Approx(a[i]).epsilon(ulp).margin(1e-4));
    }
    return differ;
  }
  if (cpu_t.dtype() != kFloat32) {
    const size_t n = static_cast<size_t>(numel(cpu_t.shape())) * dtype_size(cpu_t.dtype());
    CHECK(std::memcmp(cpu_t.raw_data(), ipu_t.raw_data(), n) == 0);
    return 0;
  }
  auto a = cpu_t.to_vector<float>();
  auto b = ipu_t.to_vector<float>();
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], 4) != 0) ++differ;
    if (std::isnan(a[i])) {
      REQUIRE(std::isnan(b[i]));
      continue;
    }
    INFO("element " << i);
    REQUIRE(b[i] == Approx(a[i]).epsilon(1e-5).margin(1e-6));
  }
  return differ;
}

// Traces f(params, inputs); with `backward` the graph also computes the gradients of
// sum(y * y) (y = the first output) with respect to every parameter.
ir::Trace trace_case(const std::function<Ts(const Ts&, const Ts&)>& f, const Ts& params,
                     const Ts& inputs, bool backward) {
  ir::Tracer tracer;
  Ts xi;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "x";
    name +=
        std::to_string(i);  // (not "x" + ...: GCC 12 -O3 warns falsely on that form, -Wrestrict)
    xi.push_back(tracer.input(inputs[i], name));
  }
  Ts outs = f(params, xi);
  if (backward) {
    Tensor loss = sum(mul(outs[0], outs[0]));
    loss.backward();
    outs.push_back(loss);
    for (auto& p : params) outs.push_back(p.grad());
  }
  return tracer.finish(outs);
}

void check_case(const std::string& name, const std::function<Ts(const Ts&, const Ts&)>& f,
                const Ts& params, const Ts& inputs, bool backward, const std::string& target_name) {
  INFO("case " << name << " on " << target_name);
  ir::Trace tr = trace_case(f, params, inputs, backward);
  cpu::GraphExecutor ref(tr.graph);
  ipu::CompileOptions opts;
  opts.progress = false;
  auto exe = ipu::compile(tr.graph, ipu::target_preset(target_name), opts);
  // One kernel call per tile: every vertex runs on exactly its own slice.
  ipu::ExecOptions per_tile;
  per_tile.max_chunks = 1 << 20;
  per_tile.min_parallel_work = 0;
  exe->set_exec_options(per_tile);
  for (uint64_t step : {0u, 3u}) {
    Ts want = ref.run(inputs, tr.states, step);
    Ts got = exe->run(inputs, tr.states, step);
    REQUIRE(want.size() == got.size());
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i)
      differ += compare(want[i], got[i], name + " output " + std::to_string(i));
    if (differ) WARN(name << ": " << differ << " elements within tolerance but not bit-identical");
  }
  // The chunked (default) execution gives the same numbers as the per-tile one.
  exe->set_exec_options({});
  Ts a = ref.run(inputs, tr.states, 1);
  Ts b = exe->run(inputs, tr.states, 1);
  for (size_t i = 0; i < a.size(); ++i)
    compare(a[i], b[i], name + " chunked output " + std::to_string(i));
  CHECK(exe->last_run_cycles().total > 0);
}

Tensor param(const Shape& s, Generator& g, double scale = 0.5) {
  return mul(randn(s, &g), scale).detach().requires_grad_();
}

}  // namespace

TEST_CASE("ipu executable matches the cpu executor for every op family", "[ipu]") {
  const std::string target = GENERATE(std::string("tiny"), std::string("ipu2"));
  Generator g(11);

  check_case(
      "unary",
      [](const Ts& p, const Ts& x) {
        Tensor h = mul(x[0], p[0]);
        Ts o{add(add(exp(mul(h, 0.1)), tanh(h)), add(sigmoid(h), relu(h))),
             gelu(h),
             sqrt(abs(h)),
             log(add(abs(h), 1.0)),
             clamp(h, -0.5, 0.5),
             pow(h, 2.0),
             neg(h),
             sign(h),
             rsqrt(add(abs(h), 0.5))};
        return o;
      },
      {param({6, 40}, g)}, {randn({6, 40}, &g)}, true, target);

  check_case(
      "broadcasting",
      [](const Ts& p, const Ts& x) {
        Tensor a = add(x[0], p[0]);  // [4,5,6] + [6]
        Tensor b = mul(a, p[1]);     // * [5,1]
        Tensor c = div(b, add(abs(p[1]), 1.0));
        Tensor d = maximum(c, x[1]);  // [1,6]
        Tensor e = minimum(d, p[0]);
        Tensor w = where(gt(x[0], 0.0), e, sub(p[0], x[1]));
        Ts o{add(w, b), cast(lt(a, b), kFloat32), cast(eq(sign(a), sign(b)), kFloat32),
             cast(logical_and(ge(a, 0.0), lt(b, 0.5)), kInt32), expand(p[1], {3, 5, 6})};
        return o;
      },
      {param({6}, g), param({5, 1}, g)}, {randn({4, 5, 6}, &g), randn({1, 6}, &g)}, true, target);

  check_case(
      "reductions",
      [](const Ts& p, const Ts& x) {
        Tensor h = mul(x[0], p[0]);  // [6, 7, 9]
        auto mx = max(h, 2);
        auto mn = min(h, 0, true);
        Ts o{add(sum(h, {2}), sum(h, {0, 2}, false).reshape({1, 7}).expand({6, 7})),
             sum(h, {1}),
             sum(h),
             mean(h, {2}, true),
             amax(h, {0}),
             amin(h, {1, 2}),
             mx.first,
             mx.second,
             mn.first,
             mn.second,
             argmax(h, 1),
             argmax(h),
             var(h, {1}),
             sum(h, {0})};
        return o;
      },
      {param({6, 7, 9}, g)}, {randn({6, 7, 9}, &g)}, true, target);

  check_case(
      "long full sum",
      [](const Ts& p, const Ts& x) {
        return Ts{sum(mul(x[0], p[0])), sum(x[1])};
      },
      {param({3000}, g)}, {randn({3000}, &g), randn({40000}, &g)}, true, target);

  check_case(
      "matmul",
      [](const Ts& p, const Ts& x) {
        Ts o{matmul(x[0], p[0]),                    // [8,12] x [12,10]
             linear(x[0], p[1], p[2]),              // x W^T + b
             matmul(x[1], p[3]),                    // [3,5,7] x [3,7,4]
             matmul(x[1], p[4]),                    // [3,5,7] x [7,4] (broadcast B)
             matmul(transpose(x[0], 0, 1), x[0])};  // trans_a
        return Ts{add(sum(o[0]), add(sum(o[1]), add(sum(o[2]), add(sum(o[3]), sum(o[4]))))),
                  o[0],
                  o[1],
                  o[2],
                  o[3],
                  o[4]};
      },
      {param({12, 10}, g), param({9, 12}, g), param({9}, g), param({3, 7, 4}, g), param({7, 4}, g)},
      {randn({8, 12}, &g), randn({3, 5, 7}, &g)}, true, target);

  check_case(
      "conv",
      [](const Ts& p, const Ts& x) {
        Tensor a =
            conv2d(x[0], p[0], p[1], {2, 2}, {1, 1}, {1, 1}, 2);  // groups 2, stride 2, padding 1
        Tensor b = conv2d(x[0], p[2], Tensor(), {1, 1}, {0, 0});
        return Ts{add(sum(a), sum(b)), a, b};
      },
      {param({6, 2, 3, 3}, g), param({6}, g), param({5, 4, 3, 3}, g)}, {randn({3, 4, 9, 9}, &g)},
      true, target);

  check_case(
      "conv transpose",
      [](const Ts& p, const Ts& x) {
        Tensor h = mul(x[0], p[0]);                          // [2, 4, 5, 4]
        Tensor a = conv_transpose2d(h, p[1], p[2], {2, 2});  // UNet's up-convolution
        Tensor b = conv_transpose2d(h, p[3], Tensor(), {2, 2}, {1, 1}, {1, 1}, 2);  // groups 2
        // output_padding past the stride (below the dilation): cropped and zero-filled.
        Tensor c = conv_transpose2d(h, p[3], p[2], {1, 1}, {1, 0}, {1, 1}, 1, {2, 2});
        return Ts{add(sum(mul(a, a)), add(sum(mul(b, b)), sum(mul(c, c)))), a, b, c};
      },
      {param({5, 4}, g), param({4, 3, 2, 2}, g), param({3}, g), param({4, 3, 3, 3}, g)},
      {randn({2, 4, 5, 4}, &g)}, true, target);

  check_case(
      "rotary embedding",
      [](const Ts& p, const Ts& x) {
        namespace F = nn::functional;
        Tensor h = mul(x[0], p[0]);  // [2, 6, 3, 16]
        Tensor a = F::rotary_embedding(h, F::RotaryEmbeddingFuncOptions().rotary_dim(8).offset(5));
        Tensor b = F::rotary_embedding(
            h, F::RotaryEmbeddingFuncOptions().seq_dim(2).offset(2).style(nn::RotaryStyle::Half));
        return Ts{add(sum(mul(a, a)), sum(mul(b, p[0]))), a, b};
      },
      {param({16}, g)}, {randn({2, 6, 3, 16}, &g)}, true, target);

  check_case(
      "pools",
      [](const Ts& p, const Ts& x) {
        Tensor h = mul(x[0], p[0]);
        Tensor a = max_pool2d(h, {2, 2});
        Tensor b = avg_pool2d(h, {3, 3}, {2, 2}, {1, 1});
        Tensor c = adaptive_avg_pool2d(h, {3, 3});
        return Ts{add(sum(a), add(sum(b), sum(c))), a, b, c};
      },
      {param({2, 3, 8, 8}, g)}, {randn({2, 3, 8, 8}, &g)}, true, target);

  check_case(
      "softmax and cross-entropy",
      [](const Ts& p, const Ts& x) {
        Tensor h = mul(x[0], p[0]);  // [7, 10]
        return Ts{add(cross_entropy(h, x[1]), sum(mul(softmax(h, 0), p[0]))), softmax(h, 1),
                  log_softmax(h, 1), softmax(h, 0), cross_entropy(softmax(h, 1), x[1])};
      },
      {param({7, 10}, g)}, {randn({7, 10}, &g), randint(0, 10, {7}, &g)}, true, target);

  check_case(
      "index ops",
      [](const Ts& p, const Ts& x) {
        Tensor a = index_select(p[0], 0, x[0]);  // rows
        Tensor b = index_select(p[0], 1, x[1]);  // columns
        Tensor c = gather(p[0], 1, x[2]);
        Tensor d = embedding(p[1], x[0]);
        return Ts{add(sum(a), add(sum(b), add(sum(c), sum(d)))), a, b, c, d};
      },
      {param({6, 8}, g), param({10, 5}, g)},
      {from_vector<int64_t>({0, 3, 3, 5, 1}, {5}), from_vector<int64_t>({7, 0, 2}, {3}),
       randint(0, 8, {6, 4}, &g)},
      true, target);

  check_case(
      "movement",
      [](const Ts& p, const Ts& x) {
        Tensor h = mul(x[0], p[0]);  // [4, 6, 5]
        Tensor a = cat({h, mul(h, 2.0)}, 0);
        Tensor b = cat({h, slice(h, 1, 0, 3)}, 1);
        Tensor c = slice(h, 2, 1, 5, 2);
        Tensor d = slice(h, 0, 1, 4, 2);
        Tensor e = permute(h, {2, 0, 1}).contiguous();
        Tensor f = transpose(h, 1, 2).contiguous().reshape({4, 30});
        return Ts{add(sum(a), add(sum(b), add(sum(c), add(sum(d), add(sum(e), sum(f)))))),
                  a,
                  b,
                  c,
                  d,
                  e,
                  f};
      },
      {param({4, 6, 5}, g)}, {randn({4, 6, 5}, &g)}, true, target);

  check_case(
      "layer norm",
      [](const Ts& p, const Ts& x) {
        Tensor h = mul(x[0], p[0]);                                      // [4, 6, 16]
        Tensor a = layer_norm(h, {16}, p[1], p[2]);                      // fused, affine
        Tensor b = layer_norm(h, {6, 16}, Tensor(), Tensor(), 1e-3);     // two dims, no affine
        Tensor c = layer_norm(slice(h, 0, 0, 1), {16}, p[1], Tensor());  // one leading row
        return Ts{add(sum(mul(a, a)), add(sum(mul(b, p[0])), sum(mul(c, c)))), a, b, c};
      },
      {param({6, 16}, g), param({16}, g), param({16}, g)}, {randn({4, 6, 16}, &g)}, true, target);

  check_case(
      "batch norm",
      [](const Ts& p, const Ts& x) {
        Tensor h = mul(x[0], p[0]);  // [3, 6, 4, 5]
        Tensor a = batch_norm_act(h, Tensor(), Tensor(), p[1], p[2], true, 0.1, 1e-5, Tensor(),
                                  true);  // fused BN + ReLU
        Tensor b = batch_norm_act(h, Tensor(), Tensor(), p[1], p[2], true, 0.1, 1e-3, x[1],
                                  true);                                         // + residual
        Tensor c = batch_norm(h, Tensor(), Tensor(), Tensor(), Tensor(), true);  // no affine
        Tensor d;
        {
          NoGradGuard no_grad;  // given statistics: the inference op
          d = batch_norm_act(h, x[2], add(abs(x[2]), 0.5), p[1], p[2], false, 0.1, 1e-5, x[1],
                             true);
        }
        return Ts{add(sum(mul(a, b)), sum(mul(c, p[0]))), a, b, c, d};
      },
      {param({6, 4, 5}, g), param({6}, g), param({6}, g)},
      {randn({3, 6, 4, 5}, &g), randn({3, 6, 4, 5}, &g), randn({6}, &g)}, true, target);

  check_case(
      "attention ops",
      [](const Ts& p, const Ts& x) {
        Tensor q = mul(x[0], p[0]);  // [2, 3, 5, 4]
        Tensor causal = scaled_dot_product_attention(q, x[1], x[1], Tensor(), 0.0, true);
        Tensor masked = scaled_dot_product_attention(q, x[1], q, x[2]);
        Tensor e = einsum("bhqd,bhkd->bhqk", {q, x[1]});
        Tensor f = einsum("ij,jk->ik", {reshape(q, {30, 4}), p[1]});
        Tensor t = add(triu(e, 1), tril(e, -1));
        Tensor m = bmm(reshape(q, {6, 5, 4}), transpose(reshape(x[1], {6, 5, 4}), 1, 2));
        Tensor bb = baddbmm(p[2], reshape(q, {6, 5, 4}), reshape(x[1], {6, 4, 5}), 0.5, 2.0);
        return Ts{add(sum(mul(causal, masked)), add(sum(mul(t, t)), add(sum(f), sum(mul(m, bb))))),
                  causal,
                  masked,
                  e,
                  f,
                  t,
                  m,
                  bb};
      },
      {param({2, 3, 5, 4}, g), param({4, 7}, g), param({5, 5}, g)},
      {randn({2, 3, 5, 4}, &g), randn({2, 3, 5, 4}, &g),
       from_vector<bool>({1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0,  // true = attend, and
                          1, 1, 1, 0, 0, 1, 0, 0, 0, 0},                // every row attends
                         {5, 5})},
      true, target);

  {
    // A pre-LN causal transformer block with a tied LM head: MultiheadAttention (fused causal
    // kernel), layer norms, GELU MLP and cross-entropy with ignored targets, forward and backward.
    Generator mg(21);
    nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(8, 2).batch_first(true));
    check_case(
        "transformer block",
        [&mha](const Ts& p, const Ts& x) {
          Tensor h = embedding(p[0], x[0]);  // [2, 6, 8]
          Tensor a = layer_norm(h, {8}, p[1], p[2]);
          h = add(h, std::get<0>(mha(a, a, a, Tensor(), false, Tensor(), true, true)));
          Tensor m = layer_norm(h, {8}, p[3], p[4]);
          h = add(h, linear(gelu(linear(m, p[5]), "tanh"), p[6]));
          Tensor logits = linear(h, p[0]);  // tied to the embedding
          Tensor loss = cross_entropy(reshape(logits, {12, 11}), reshape(x[1], {12}));
          return Ts{add(loss, sum(mul(logits, 0.01))), logits};
        },
        {param({11, 8}, mg), param({8}, mg), param({8}, mg), param({8}, mg), param({8}, mg),
         param({16, 8}, mg), param({8, 16}, mg)},
        {randint(0, 11, {2, 6}, &mg),
         from_vector<int64_t>({1, 2, 3, -100, 5, 6, 7, 8, -100, 10, 0, 1}, {2, 6})},
        true, target);
  }

  check_case(
      "weighted cross-entropy with ignored targets",
      [](const Ts& p, const Ts& x) {
        Tensor h = mul(x[0], p[0]);  // [7, 10]
        return Ts{add(cross_entropy(h, x[1], Reduction::Mean, 0.1, x[2]),
                      nll_loss(log_softmax(h, 1), x[1], Reduction::Sum, x[2])),
                  cross_entropy(h, x[1], Reduction::None, 0.0, x[2]),
                  nll_loss(log_softmax(h, 1), x[3], Reduction::Mean, Tensor(), 3)};
      },
      {param({7, 10}, g)},
      {randn({7, 10}, &g), from_vector<int64_t>({1, -100, 3, 9, -100, 0, 3}, {7}),
       add(rand({10}, &g), 0.5), from_vector<int64_t>({1, 3, 3, 9, 2, 0, 3}, {7})},
      true, target);

  check_case(
      "random",
      [](const Ts& p, const Ts& x) {
        Generator rg(5);
        Tensor h = dropout(mul(x[0], p[0]), 0.5, true, &rg);
        return Ts{h, rand({3, 50}, &rg), randn({100}, &rg), randint(0, 7, {20}, &rg),
                  arange(0.0, 30.0)};
      },
      {param({9, 33}, g)}, {randn({9, 33}, &g)}, true, target);
}

namespace {

using Forward = std::function<Tensor(const Ts& params, const Tensor& x)>;

// One SGD step written with ordinary ops, traced once.
ir::Trace trace_training(const Forward& f, Ts& params, const Tensor& x, const Tensor& y,
                         double lr) {
  ir::Tracer tracer;
  Tensor xi = tracer.input(x, "x");
  Tensor yi = tracer.input(y, "y");
  for (auto& p : params) p.set_grad(Tensor());
  Tensor loss = cross_entropy(f(params, xi), yi);
  loss.backward();
  {
    NoGradGuard ng;
    for (auto& p : params) p.sub_(mul(p.grad(), lr));
  }
  return tracer.finish({loss});
}

Ts clones(const Ts& s) {
  Ts c;
  for (auto& t : s) c.push_back(t.clone().detach());
  return c;
}

Forward mlp() {
  return
      [](const Ts& p, const Tensor& x) { return linear(relu(linear(x, p[0], p[1])), p[2], p[3]); };
}
Forward cnn() {
  return [](const Ts& p, const Tensor& x) {
    Tensor h = relu(max_pool2d(conv2d(x, p[0], p[1]), {2, 2}));
    h = relu(max_pool2d(conv2d(h, p[2], p[3]), {2, 2}));
    Generator dg(9);
    h = dropout(relu(linear(h.flatten(1), p[4], p[5])), 0.5, true, &dg);
    return softmax(linear(h, p[6], p[7]), 1);
  };
}
std::vector<Shape> cnn_shapes() {
  return {{8, 1, 3, 3}, {8}, {16, 8, 3, 3}, {16}, {32, 16 * 5 * 5}, {32}, {10, 32}, {10}};
}

Ts make_params(const std::vector<Shape>& shapes, uint64_t seed) {
  Generator g(seed);
  Ts p;
  for (auto& s : shapes) p.push_back(mul(randn(s, &g), 0.2).detach().requires_grad_());
  return p;
}

void train_and_compare(const Forward& f, const std::vector<Shape>& shapes, const Shape& xshape) {
  Ts params = make_params(shapes, 7);
  Generator dg(3);
  Tensor x = randn(xshape, &dg);
  Tensor y = randint(0, 10, {xshape[0]}, &dg);
  ir::Trace tr = trace_training(f, params, x, y, 0.05);
  cpu::GraphExecutor ref(tr.graph);
  ipu::CompileOptions opts;
  opts.progress = false;
  auto exe = ipu::compile(tr.graph, ipu::target_preset("ipu2"), opts);
  Ts s_cpu = clones(tr.states), s_ipu = clones(tr.states);
  for (uint64_t step = 0; step < 3; ++step) {
    Tensor lc = ref.run({x, y}, s_cpu, step)[0];
    Tensor li = exe->run({x, y}, s_ipu, step)[0];
    compare(lc, li, "loss at step " + std::to_string(step));
    for (size_t i = 0; i < s_cpu.size(); ++i)
      compare(s_cpu[i], s_ipu[i], "state " + std::to_string(i));
  }
  CHECK_FALSE(exe->memory_report().out_of_memory);
  CHECK(exe->last_run_cycles().total > 0);
}

}  // namespace

TEST_CASE("ipu executable matches the cpu executor in float16 and bfloat16", "[ipu][half]") {
  const std::string target = GENERATE(std::string("tiny"), std::string("ipu2"));
  const DType dt = GENERATE(kFloat16, kBFloat16);
  Generator g(12);
  auto hp = [&](const Shape& s, double scale = 0.5) {
    return mul(randn(s, &g), scale).to(dt).detach().requires_grad_();
  };
  auto hx = [&](const Shape& s) { return randn(s, &g).to(dt); };
  check_case(
      std::string("half matrix ops ") + dtype_name(dt),
      [](const Ts& p, const Ts& x) {
        Tensor y = relu(matmul(x[0], p[0]));                  // K = 300: split on tiles
        Tensor c = conv2d(x[1], p[1], p[2], {1, 1}, {1, 1});  // conv, its two gradients
        Tensor m = max_pool2d(c, {2, 2});                     // planes over the tiles
        Tensor bn = sum(mul(c, c), {0, 2, 3});                // BatchNorm-style sum: a grid
        // The first output (whose square sum is the loss) reads every parameter.
        Tensor all = add(add(sum(y, {1}), mean(m)), mul(mean(bn), 0.01));
        Ts o{all, softmax(y, 1), m, avg_pool2d(c, {2, 2}), bn, y, gelu(m)};
        return o;
      },
      {hp({300, 24}, 0.1), hp({6, 3, 3, 3}, 0.1), hp({6})}, {hx({16, 300}), hx({4, 3, 8, 8})}, true,
      target);
}

TEST_CASE("ipu training steps match the cpu executor: MLP", "[ipu]") {
  train_and_compare(mlp(), {{64, 100}, {64}, {10, 64}, {10}}, {16, 100});
}

TEST_CASE("ipu training steps match the cpu executor: CNN with dropout", "[ipu]") {
  train_and_compare(cnn(), cnn_shapes(), {8, 1, 28, 28});
}

TEST_CASE("ipu results are bit-identical with 1 and 2 threads and across runs", "[ipu]") {
  RestoreThreads restore;
  Ts params = make_params(cnn_shapes(), 7);
  Generator dg(3);
  Tensor x = randn({8, 1, 28, 28}, &dg);
  Tensor y = randint(0, 10, {8}, &dg);
  ir::Trace tr = trace_training(cnn(), params, x, y, 0.05);
  ipu::CompileOptions opts;
  opts.progress = false;
  auto exe = ipu::compile(tr.graph, ipu::target_preset("ipu2"), opts);
  auto train = [&](int threads, int64_t max_chunks) {
    set_num_threads(threads);
    ipu::ExecOptions e;
    e.max_chunks = max_chunks;
    e.min_parallel_work = 0;
    exe->set_exec_options(e);
    Ts s = clones(tr.states);
    std::vector<uint32_t> bits;
    for (uint64_t step = 0; step < 3; ++step) {
      auto v = exe->run({x, y}, s, step)[0].to_vector<float>();
      for (auto f : v) bits.push_back(std::bit_cast<uint32_t>(f));
    }
    for (auto& t : s)
      for (auto f : t.to_vector<float>()) bits.push_back(std::bit_cast<uint32_t>(f));
    return bits;
  };
  const auto one = train(1, 0);
  const auto two = train(2, 0);
  const auto many = train(2, 1 << 20);
  CHECK(one == two);
  CHECK(one == many);
  CHECK(one == train(2, 0));
}
