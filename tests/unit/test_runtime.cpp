// PopTorch-style execution: the batching arithmetic, replication == a bigger batch, gradient
// accumulation == a bigger batch, device iterations == that many updates, output modes, and
// bad options reported before anything runs.
#include <sstream>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/nn/nn.hpp>
#include <ipuml/optim/optim.hpp>
#include <ipuml/runtime/training_model.hpp>

using namespace ipuml;

namespace {

struct MlpImpl : nn::Module {
  nn::Linear fc1{nullptr}, fc2{nullptr};
  MlpImpl() : nn::Module("Mlp") {
    fc1 = register_module("fc1", nn::Linear(nn::LinearOptions(6, 16)));
    fc2 = register_module("fc2", nn::Linear(nn::LinearOptions(16, 3)));
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};
IPUML_MODULE(Mlp);

Mlp make_model() {
  manual_seed(3);
  return Mlp();
}

runtime::LossFn ce() {
  return [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
}

void require_same_weights(const Mlp& a, const Mlp& b, double tol) {
  auto pa = a->parameters();
  auto pb = b->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = pa[i].to_vector<double>();
    auto vb = pb[i].to_vector<double>();
    for (size_t k = 0; k < va.size(); ++k) REQUIRE(va[k] == Approx(vb[k]).margin(tol).epsilon(tol));
  }
}

Options cpu_options() { return Options().useIpuModel(false); }

}  // namespace

TEST_CASE("R replicas with micro-batch B equal one replica with batch R x B", "[runtime]") {
  Generator g(9);
  Tensor x = randn({8, 6}, &g);
  Tensor y = randint(0, 3, {8}, &g);
  Mlp a = make_model(), b = make_model();
  optim::SGD oa(a->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD ob(b->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto ta = trainingModel(a.ptr(), cpu_options().replicationFactor(4), oa, ce());
  auto tb = trainingModel(b.ptr(), cpu_options(), ob, ce());
  for (int i = 0; i < 3; ++i) {
    ta(x, y);
    tb(x, y);
  }
  CHECK(ta.micro_batch() == 2);
  CHECK(tb.micro_batch() == 8);
  require_same_weights(a, b, 1e-5);
}

TEST_CASE("gradient accumulation of G micro-batches equals one batch of G x B", "[runtime]") {
  Generator g(10);
  Tensor x = randn({6, 6}, &g);
  Tensor y = randint(0, 3, {6}, &g);
  Mlp a = make_model(), b = make_model();
  optim::Adam oa(a->parameters(), optim::AdamOptions(0.01));
  optim::Adam ob(b->parameters(), optim::AdamOptions(0.01));
  Options opts = cpu_options();
  opts.Training.gradientAccumulation(3);
  auto ta = trainingModel(a.ptr(), opts, oa, ce());
  auto tb = trainingModel(b.ptr(), cpu_options(), ob, ce());
  for (int i = 0; i < 3; ++i) {
    ta(x, y);
    tb(x, y);
  }
  require_same_weights(a, b, 1e-5);
}

TEST_CASE("device iterations perform that many updates, equal to eager steps", "[runtime]") {
  Generator g(11);
  Tensor x = randn({12, 6}, &g);
  Tensor y = randint(0, 3, {12}, &g);
  Mlp a = make_model(), b = make_model();
  optim::SGD oa(a->parameters(), optim::SGDOptions(0.05));
  optim::SGD ob(b->parameters(), optim::SGDOptions(0.05));
  auto ta = trainingModel(a.ptr(), cpu_options().deviceIterations(3).outputMode(OutputMode::All),
                          oa, ce());
  Tensor losses = ta(x, y);
  REQUIRE(losses.shape() == Shape{3});
  auto lv = losses.to_vector<float>();
  for (int it = 0; it < 3; ++it) {
    ob.zero_grad();
    Tensor loss = cross_entropy(b(x.narrow(0, it * 4, 4)), y.narrow(0, it * 4, 4));
    CHECK(loss.item<float>() == Approx(lv[static_cast<size_t>(it)]).epsilon(1e-5));
    loss.backward();
    ob.step();
  }
  require_same_weights(a, b, 1e-5);
  CHECK(ta.last_stats().samples == 12);
  CHECK(ta.last_stats().wall_seconds > 0);
}

TEST_CASE("output modes select losses as PopTorch does", "[runtime]") {
  Generator g(12);
  Tensor x = randn({16, 6}, &g);
  Tensor y = randint(0, 3, {16}, &g);
  auto run = [&](OutputMode m, int64_t n = 1) {
    Mlp a = make_model();
    optim::SGD o(a->parameters(), optim::SGDOptions(0.0));
    auto t = trainingModel(
        a.ptr(), cpu_options().deviceIterations(4).replicationFactor(2).outputMode(m, n), o, ce());
    return t(x, y);
  };
  Tensor all = run(OutputMode::All);
  CHECK(all.shape() == Shape{8});
  CHECK(run(OutputMode::Final).to_vector<float>() == all.slice(0, 6, 8).to_vector<float>());
  CHECK(run(OutputMode::EveryN, 2).shape() == Shape{4});
  CHECK(run(OutputMode::Sum).item<float>() == Approx(all.sum().item<float>()).epsilon(1e-6));
}

TEST_CASE("inference model evaluates a short last batch padded, every row counted",
          "[runtime][hostile]") {
  Generator g(14);
  Tensor x = randn({12, 6}, &g);
  Mlp a = make_model();
  auto im = inferenceModel(a.ptr(), cpu_options().deviceIterations(3).replicationFactor(2));
  const Tensor full_out = im(x);
  // 5 rows: not even a multiple of the 6 micro-batches; padded to 12, 5 outputs come back.
  const Tensor part = im(x.narrow(0, 0, 5).contiguous());
  CHECK(part.shape() == Shape{5, full_out.size(1)});
  CHECK(im.last_stats().samples == 5);
  CHECK(part.to_vector<float>() == full_out.narrow(0, 0, 5).contiguous().to_vector<float>());
  CHECK_THROWS_WITH(im(randn({13, 6}, &g)), Catch::Contains("more rows need a new inferenceModel"));
  CHECK_THROWS_WITH(im(randn({5, 7}, &g)), Catch::Contains("compiled for data [12, 6]"));
}

TEST_CASE("inference model returns every row's output in order", "[runtime]") {
  Generator g(13);
  Tensor x = randn({12, 6}, &g);
  Mlp a = make_model();
  auto im = inferenceModel(a.ptr(), cpu_options().deviceIterations(3).replicationFactor(2));
  Tensor out = im(x);
  a->eval();
  NoGradGuard ng;
  Tensor ref = a(x);
  REQUIRE(out.shape() == ref.shape());
  auto vo = out.to_vector<float>();
  auto vr = ref.to_vector<float>();
  for (size_t i = 0; i < vo.size(); ++i) CHECK(vo[i] == Approx(vr[i]).epsilon(1e-5));
}

TEST_CASE("bad options and batches are reported before anything runs", "[runtime][errors]") {
  CHECK_THROWS_WITH(Options().deviceIterations(0),
                    Catch::Contains("deviceIterations: must be >= 1"));
  CHECK_THROWS_WITH(Options().replicationFactor(-1), Catch::Contains("replicationFactor"));
  CHECK_THROWS_WITH(Options().setAvailableMemoryProportion(1.5), Catch::Contains("(0, 1]"));
  Mlp a = make_model();
  optim::SGD o(a->parameters(), optim::SGDOptions(0.1));
  auto before = a->parameters()[0].to_vector<float>();
  auto t = trainingModel(a.ptr(), cpu_options().deviceIterations(3).replicationFactor(2), o, ce());
  CHECK_THROWS_WITH(t(randn({10, 6}), randint(0, 3, {10})), Catch::Contains("does not split"));
  CHECK_THROWS_WITH(t(randn({12, 6}), randint(0, 3, {10})), Catch::Contains("do not match"));
  CHECK(a->parameters()[0].to_vector<float>() == before);
  Options pipelined = cpu_options().setExecutionStrategy(runtime::ExecutionStrategy::Pipelined);
  CHECK(pipelined.gradient_accumulation() == 1);
}

TEST_CASE("on the emulated IPU, replication equals a bigger batch and reports simulated time",
          "[runtime][ipu]") {
  Generator g(21);
  Tensor x = randn({8, 6}, &g);
  Tensor y = randint(0, 3, {8}, &g);
  Mlp a = make_model(), b = make_model();
  optim::SGD oa(a->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD ob(b->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Options ipu = Options().target("ipu2").showCompilationProgressBar(false);
  auto ta = trainingModel(a.ptr(), Options(ipu).replicationFactor(2), oa, ce());
  auto tb = trainingModel(b.ptr(), cpu_options(), ob, ce());
  for (int i = 0; i < 3; ++i) {
    ta(x, y);
    tb(x, y);
  }
  require_same_weights(a, b, 1e-5);
  REQUIRE(ta.last_stats().simulated_seconds.has_value());
  CHECK(*ta.last_stats().simulated_seconds > 0);
  std::ostringstream summary;
  ta.printProfileSummary(summary);
  const std::string text = summary.str();
  CHECK_THAT(text, Catch::Contains("897.0 MB"));
  // Every program of the run, and each throughput line saying what it counts.
  CHECK_THAT(text, Catch::Contains("Program 'training': one micro-batch of"));
  CHECK_THAT(text, Catch::Contains("Program 'weight_update': the optimizer step"));
  CHECK_THAT(text, Catch::Contains("Throughput of this program (one run, one replica)"));
  CHECK_THAT(text, Catch::Contains("2 replicas of 1 IPU"));
  CHECK_THAT(text, Catch::Contains("+ gradient all-reduce"));
  CHECK_THAT(text, Catch::Contains("projected throughput"));
  CHECK_THAT(text, !Catch::Contains("Compile-only"));
  // The configuration's throughput is what the run simulated: its samples over its seconds.
  const auto e = ta.estimate(x, y);
  CHECK(e.samples_per_second() ==
        Approx(static_cast<double>(x.size(0)) / *ta.last_stats().simulated_seconds));
}

TEST_CASE("asking for more IPUs than the emulated system has fails before anything runs",
          "[runtime][ipu][errors]") {
  Mlp a = make_model();
  optim::SGD o(a->parameters(), optim::SGDOptions(0.1));
  auto before = a->parameters()[0].to_vector<float>();
  auto t = trainingModel(a.ptr(), Options().replicationFactor(8).showCompilationProgressBar(false),
                         o, ce());
  CHECK_THROWS_WITH(t(randn({16, 6}), randint(0, 3, {16})),
                    Catch::Contains("needs 8 IPUs, but the emulated system has 4"));
  CHECK(a->parameters()[0].to_vector<float>() == before);
  auto t2 = trainingModel(a.ptr(), Options().target("ipu7"), o, ce());
  CHECK_THROWS_WITH(t2(randn({2, 6}), randint(0, 3, {2})), Catch::Contains("ipu7"));
  auto t3 = trainingModel(a.ptr(), Options().setTargetOption("tiles_per_ipux", "4"), o, ce());
  CHECK_THROWS_WITH(t3(randn({2, 6}), randint(0, 3, {2})), Catch::Contains("tiles_per_ipux"));
}

TEST_CASE("BeginBlock splits a model over IPUs, backward included, with the same numbers",
          "[runtime][ipu]") {
  Generator g(31);
  Tensor x = randn({4, 6}, &g);
  Tensor y = randint(0, 3, {4}, &g);
  Mlp a = make_model(), b = make_model();
  runtime::BeginBlock(a->fc2, 1);
  optim::SGD oa(a->parameters(), optim::SGDOptions(0.1));
  optim::SGD ob(b->parameters(), optim::SGDOptions(0.1));
  auto ta = trainingModel(a.ptr(), Options().showCompilationProgressBar(false), oa, ce());
  auto tb = trainingModel(b.ptr(), cpu_options(), ob, ce());
  for (int i = 0; i < 2; ++i) {
    ta(x, y);
    tb(x, y);
  }
  require_same_weights(a, b, 1e-5);
  int on_ipu1 = 0, matmuls_on_ipu1 = 0;
  for (auto& n : ta.step_graph().nodes) {
    on_ipu1 += n.placement == 1;
    matmuls_on_ipu1 += n.placement == 1 && n.kind == ir::OpKind::MatMul;
  }
  CHECK(on_ipu1 > 0);
  CHECK(matmuls_on_ipu1 == 3);  // fc2 forward, and its two backward products
  CHECK(ta.step_graph().nodes.front().placement == 0);
  CHECK(ir::PlacementGuard::current() == 0);  // placement does not leak out of the trace
  auto tp = trainingModel(a.ptr(), Options().replicationFactor(3), oa, ce());
  CHECK_THROWS_WITH(tp(randn({6, 6}), randint(0, 3, {6})), Catch::Contains("needs 6 IPUs"));
}

namespace {

// Two inputs (features and a per-sample scale), two outputs (class logits and a regression),
// as BERT takes ids, token types and a mask and returns MLM and NSP logits.
struct TwoHeadImpl : nn::Module {
  nn::Linear body{nullptr}, cls{nullptr}, reg{nullptr};
  TwoHeadImpl() : nn::Module("TwoHead") {
    body = register_module("body", nn::Linear(nn::LinearOptions(6, 8)));
    cls = register_module("cls", nn::Linear(nn::LinearOptions(8, 3)));
    reg = register_module("reg", nn::Linear(nn::LinearOptions(8, 1)));
  }
  runtime::Tensors forward(const Tensor& x, const Tensor& scale) {
    Tensor h = relu(body(x)) * scale;
    return {cls(h), reg(h)};
  }
};
IPUML_MODULE(TwoHead);

TwoHead make_two_head() {
  manual_seed(5);
  return TwoHead();
}

}  // namespace

TEST_CASE("trainingModel and inferenceModel take several inputs, targets and outputs",
          "[runtime][ipu]") {
  Generator g(41);
  Tensor x = randn({8, 6}, &g), scale = rand({8, 1}, &g) + 0.5;
  Tensor y = randint(0, 3, {8}, &g), z = randn({8, 1}, &g);
  auto loss = [](const runtime::Tensors& out, const runtime::Tensors& tg) {
    return cross_entropy(out[0], tg[0]) + mse_loss(out[1], tg[1]);
  };
  TwoHead eager = make_two_head();
  optim::SGD oe(eager->parameters(), optim::SGDOptions(0.05));
  std::vector<float> eager_losses;
  for (int i = 0; i < 3; ++i) {
    oe.zero_grad();
    Tensor l = loss(eager->forward(x, scale), {y, z});
    l.backward();
    oe.step();
    eager_losses.push_back(l.item<float>());
  }
  for (bool ipu : {false, true}) {
    INFO((ipu ? "ipu" : "cpu"));
    TwoHead m = make_two_head();
    optim::SGD o(m->parameters(), optim::SGDOptions(0.05));
    Options opts = ipu ? Options().showCompilationProgressBar(false) : cpu_options();
    TwoHeadImpl* raw = m.ptr().get();
    auto fwd = [raw](const runtime::Tensors& in) { return raw->forward(in[0], in[1]); };
    auto t = trainingModel(m.ptr(), Options(opts).gradientAccumulation(2), o, fwd, loss);
    for (int i = 0; i < 3; ++i) {
      // Two micro-batches of 4 summed over accumulation equal one eager step on all 8 rows.
      Tensor l = t({x, scale}, {y, z});
      REQUIRE(l.numel() == 2);
    }
    auto pe = eager->parameters(), pm = m->parameters();
    for (size_t i = 0; i < pe.size(); ++i) {
      auto a = pe[i].to_vector<float>(), b = pm[i].to_vector<float>();
      for (size_t k = 0; k < a.size(); ++k) REQUIRE(b[k] == Approx(a[k]).margin(1e-5));
    }
    CHECK_THROWS_WITH(t({x}, {y, z}), Catch::Contains("compiled for data [8, 6], [8, 1]"));
    auto inf = inferenceModel(m.ptr(), opts, fwd);
    runtime::Tensors out = inf({x, scale});
    REQUIRE(out.size() == 2);
    NoGradGuard ng;
    runtime::Tensors want = m->forward(x, scale);
    for (size_t k = 0; k < 2; ++k) {
      REQUIRE(out[k].shape() == want[k].shape());
      auto a = out[k].to_vector<float>(), b = want[k].to_vector<float>();
      for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-5));
    }
    // A short last batch of 5 rows: both inputs padded, both outputs cut back to 5 rows.
    runtime::Tensors part = inf({x.narrow(0, 0, 5), scale.narrow(0, 0, 5)});
    CHECK(part[0].shape() == Shape{5, 3});
    CHECK(part[1].shape() == Shape{5, 1});
    CHECK_THROWS_WITH(inf(x), Catch::Contains("compiled for data [8, 6], [8, 1], got [8, 6]"));
  }
  auto bad = trainingModel(
      make_two_head().ptr(), cpu_options(), oe, [](const runtime::Tensors& in) { return in; },
      loss);
  CHECK_THROWS_WITH(bad({x, scale.narrow(0, 0, 4)}, {y, z}),
                    Catch::Contains("input 1 of shape [4, 1] does not match the 8 samples"));
}
