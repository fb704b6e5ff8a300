// Replicas run at the same time on the host (Options.hostReplicaThreads): each lane of replicas
// has its own instance of the compiled step, replicas keep their own copies of the buffers the
// step writes (batch-norm running statistics, replica 0's being the model's), and the results
// are the same bits whatever the number of lanes, on the CPU and on the emulated IPU.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/nn/nn.hpp>
#include <ipuml/optim/optim.hpp>
#include <ipuml/runtime/training_model.hpp>

using namespace ipuml;

namespace {

struct NetImpl : nn::Module {
  nn::BatchNorm1d bn{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::Dropout drop{nullptr};
  NetImpl() : nn::Module("Net") {
    bn = register_module("bn", nn::BatchNorm1d(6));
    fc1 = register_module("fc1", nn::Linear(nn::LinearOptions(6, 16)));
    drop = register_module("drop", nn::Dropout(0.25));
    fc2 = register_module("fc2", nn::Linear(nn::LinearOptions(16, 3)));
  }
  Tensor forward(const Tensor& x) override { return fc2(drop(relu(fc1(bn(x))))); }
};
IPUML_MODULE(Net);

runtime::LossFn ce() {
  return [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
}

Options base(bool ipu) {
  Options o;
  if (ipu)
    o.target("ipu2").showCompilationProgressBar(false);
  else
    o.useIpuModel(false);
  return o.randomSeed(5);
}

struct Run {
  std::vector<std::vector<float>> state;  // parameters and buffers, in order
  std::vector<float> losses;
  int64_t lanes = 0;
};

Run train(bool ipu, int64_t threads, int64_t replicas) {
  manual_seed(11);
  Net net;
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  Options o = base(ipu)
                  .replicationFactor(replicas)
                  .gradientAccumulation(2)
                  .deviceIterations(2)
                  .hostReplicaThreads(threads)
                  .outputMode(OutputMode::All);
  auto tm = trainingModel(net.ptr(), o, opt, ce());
  Generator g(23);
  const int64_t rows = 4 * replicas * 2 * 2;
  Run r;
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({rows, 6}, &g);
    Tensor y = randint(0, 3, {rows}, &g);
    for (float l : tm(x, y).to_vector<float>()) r.losses.push_back(l);
  }
  r.lanes = tm.host_replica_lanes();
  for (auto& p : net->parameters()) r.state.push_back(p.to_vector<float>());
  for (auto& b : net->buffers()) r.state.push_back(b.to(kFloat32).to_vector<float>());
  return r;
}

}  // namespace

TEST_CASE("replicas run on several host threads with the bits of one thread",
          "[runtime][replicas]") {
  for (bool ipu : {false, true}) {
    INFO((ipu ? "ipu" : "cpu"));
    const Run one = train(ipu, 1, 4);
    const Run two = train(ipu, 2, 4);
    const Run four = train(ipu, 4, 4);
    CHECK(one.lanes == 1);
    CHECK(two.lanes == 2);
    CHECK(four.lanes == 4);
    REQUIRE(one.losses.size() == 3 * 2 * 2 * 4);
    CHECK(one.losses == two.losses);
    CHECK(one.losses == four.losses);
    CHECK(one.state == two.state);
    CHECK(one.state == four.state);
    // The default: one lane per host core, at most one per replica.
    const Run dflt = train(ipu, 0, 4);
    CHECK(dflt.lanes >= 1);
    CHECK(dflt.lanes <= 4);
    CHECK(dflt.state == one.state);
  }
}

TEST_CASE("each replica keeps its own running statistics and the model holds replica 0's",
          "[runtime][replicas]") {
  // Two replicas, one micro-batch each: the model's running mean and variance are what one
  // batch-norm update from replica 0's rows alone gives (momentum 0.1, unbiased variance).
  for (bool ipu : {false, true}) {
    INFO((ipu ? "ipu" : "cpu"));
    manual_seed(2);
    Net net;
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.0));
    auto tm =
        trainingModel(net.ptr(), base(ipu).replicationFactor(2).hostReplicaThreads(2), opt, ce());
    Generator g(4);
    Tensor x = randn({8, 6}, &g);
    Tensor y = randint(0, 3, {8}, &g);
    tm(x, y);
    const auto xs = x.to_vector<float>();
    const auto mean = net->bn->running_mean.to_vector<float>();
    const auto var = net->bn->running_var.to_vector<float>();
    for (int c = 0; c < 6; ++c) {
      double m = 0, v = 0;
      for (int i = 0; i < 4; ++i) m += xs[static_cast<size_t>(i * 6 + c)];
      m /= 4;
      for (int i = 0; i < 4; ++i) v += std::pow(xs[static_cast<size_t>(i * 6 + c)] - m, 2);
      v /= 3;
      CHECK(mean[static_cast<size_t>(c)] == Approx(0.1 * m).margin(1e-6));
      CHECK(var[static_cast<size_t>(c)] == Approx(0.9 + 0.1 * v).margin(1e-6));
    }
    CHECK(net->bn->num_batches_tracked.item<int64_t>() == 1);
  }
}

TEST_CASE("inference replicas run on several host threads with the same outputs",
          "[runtime][replicas]") {
  for (bool ipu : {false, true}) {
    INFO((ipu ? "ipu" : "cpu"));
    manual_seed(8);
    Net net;
    Generator g(6);
    Tensor x = randn({24, 6}, &g);
    auto a = inferenceModel(
        net.ptr(), base(ipu).replicationFactor(4).deviceIterations(2).hostReplicaThreads(1));
    auto b = inferenceModel(
        net.ptr(), base(ipu).replicationFactor(4).deviceIterations(2).hostReplicaThreads(4));
    CHECK(a(x).to_vector<float>() == b(x).to_vector<float>());
    CHECK(b.host_replica_lanes() == 4);
  }
}

TEST_CASE("hostReplicaThreads rejects a negative count", "[runtime][replicas][errors]") {
  CHECK_THROWS_WITH(Options().hostReplicaThreads(-1), Catch::Contains("hostReplicaThreads"));
}
