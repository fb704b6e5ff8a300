// Recomputation checkpoints: the backward pass reads only checkpointed activations and
// recomputes the rest. Results equal the step without recomputation bit for bit (dropout masks
// included), the graph gains exactly the recomputed forward ops, and the emulated IPU's
// activation memory falls.
#include <catch2/catch.hpp>

#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/ir/recompute.hpp>
#include <ipuml/nn/nn.hpp>
#include <ipuml/optim/optim.hpp>
#include <ipuml/runtime/trace_step.hpp>
#include <ipuml/runtime/training_model.hpp>

#include "../support/ipu_options.hpp"

using namespace ipuml;

namespace {

struct DeepImpl : nn::Module {
  std::vector<nn::Linear> layers;
  bool checkpoint = false;
  DeepImpl(int64_t width, int depth) : nn::Module("Deep") {
    for (int i = 0; i < depth; ++i) {
      // Built by appending: `"l" + std::to_string(i)` draws GCC 12's -Wrestrict false positive.
      std::string name = "l";
      name += std::to_string(i);
      layers.push_back(register_module(name, nn::Linear(nn::LinearOptions(width, width))));
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& l : layers) {
      h = dropout(gelu(l(h)), 0.1, is_training());
      if (checkpoint) h = recomputation_checkpoint(h);
    }
    return h;
  }
};
IPUML_MODULE(Deep);

runtime::LossFn mse() {
  return [](const Tensor& out, const Tensor& y) { return mean(mul(sub(out, y), sub(out, y))); };
}

std::vector<std::vector<float>> train(bool checkpoint, bool ipu) {
  manual_seed(4);
  Deep net(16, 5);
  net->checkpoint = checkpoint;
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  runtime::Options o;
  o.showCompilationProgressBar(false).randomSeed(3).useIpuModel(ipu);
  auto t = trainingModel(net.ptr(), o, opt, mse());
  Generator g(6);
  const Tensor x = randn({8, 16}, &g), y = randn({8, 16}, &g);
  for (int i = 0; i < 3; ++i) t(x, y);
  std::vector<std::vector<float>> out;
  for (auto& p : net->parameters()) out.push_back(p.to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("recomputation gives the same weights bit for bit, dropout included", "[recompute]") {
  const auto plain = train(false, false);
  REQUIRE(train(true, false) == plain);
  REQUIRE(train(true, true) == plain);  // the emulated IPU runs the recomputed graph too
}

TEST_CASE("recomputation adds the recomputed forward ops and lowers IPU activation memory",
          "[recompute][ipu]") {
  auto trace = [](bool checkpoint) {
    manual_seed(1);
    Deep net(128, 8);  // activations (4096 x 128) dominate the weights (128 x 128)
    net->checkpoint = checkpoint;
    net->train();
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.01));
    return runtime::trace_training_step(
        *net, opt,
        [&](const std::vector<Tensor>& in) {
          return mean(mul(net->forward(in[0]), net->forward(in[0]).detach()));
        },
        {{{4096, 128}, kFloat32}});
  };
  const auto plain = trace(false), ckpt = trace(true);
  REQUIRE(plain.graph.checkpoints.empty());
  REQUIRE(ckpt.graph.checkpoints.size() == 16);  // two forward calls of 8 layers
  // Each layer between two checkpoints is Linear (matmul, bias add), GELU, dropout (uniform,
  // compare, cast, two muls): whatever the backward reads of them is recomputed, so the graph
  // grows, but never by more than the forward itself.
  const auto grown = static_cast<int64_t>(ckpt.graph.nodes.size() - plain.graph.nodes.size());
  CHECK(grown > 8);
  CHECK(grown < static_cast<int64_t>(plain.graph.nodes.size()) / 2);
  auto o = testing::quiet();
  o.allow_out_of_memory = true;
  const auto t = ipu::target_preset("ipu2");
  const auto p0 = ipu::plan_graph(plain.graph, t, o);
  const auto p1 = ipu::plan_graph(ckpt.graph, t, o);
  auto peak = [](const ipu::Plan& p) {
    return *std::max_element(p.memory.not_always_live_per_step.begin(),
                             p.memory.not_always_live_per_step.end());
  };
  INFO("not-always-live peak " << peak(p0) << " -> " << peak(p1) << " bytes, cycles "
                               << p0.cycles.total << " -> " << p1.cycles.total);
  CHECK(peak(p1) < peak(p0) * 3 / 4);
  CHECK(p1.cycles.total > p0.cycles.total);  // recomputing costs cycles
}

TEST_CASE("recompute_from_checkpoints leaves a graph without checkpoints alone", "[recompute]") {
  ir::Tracer tr;
  Tensor x = tr.input({{4, 4}, kFloat32}, "x");
  Tensor y = exp(x);
  auto t = tr.finish({sum(y)});
  const auto before = t.graph.signature();
  const auto rep = ir::recompute_from_checkpoints(t.graph, 1, t.graph.nodes.size());
  CHECK(rep.nodes_recomputed == 0);
  CHECK(t.graph.signature() == before);
  // Outside a trace a checkpoint is the identity.
  Tensor e = ones({2});
  CHECK(recomputation_checkpoint(e).same(e));
}
