// Tests of the vision training recipe's pieces that the zoo adds: weight decay only on conv and
// linear weights (parameter groups), and replica-local batch statistics under replication (each
// replica normalises with its own micro-batch, as BatchNorm does on IPUs).
#include <ipuml/ipuml.hpp>
#include <ipuml/models/resnet.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace ipuml;

namespace {

double max_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(double(x[i]) - y[i]));
  return worst;
}

nn::Sequential small_bn_net() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)),
                        nn::BatchNorm2d(nn::BatchNorm2dOptions(4)), nn::ReLU(), nn::Flatten(),
                        nn::Linear(nn::LinearOptions(4 * 5 * 5, 3)));
}

}  // namespace

TEST_CASE("vision recipe: weight decay skips biases and norm parameters", "[optim][vision]") {
  manual_seed(1);
  auto net = models::resnet18(models::ResNetOptions().num_classes(5).cifar_stem(true));
  const auto params = net->parameters();
  const auto groups = optim::split_for_weight_decay(params);
  int64_t convs_and_fc = 0, rest = 0;
  for (auto& [name, p] : net->named_parameters()) {
    const bool conv_or_fc_weight = name.find("conv") != std::string::npos || name == "fc.weight" ||
                                   (name.find("downsample.0") != std::string::npos);
    (conv_or_fc_weight ? convs_and_fc : rest) += 1;
  }
  CHECK(static_cast<int64_t>(groups.decay.size()) == convs_and_fc);
  CHECK(static_cast<int64_t>(groups.no_decay.size()) == rest);
  for (auto& p : groups.decay) CHECK(p.dim() > 1);
  for (auto& p : groups.no_decay) CHECK(p.dim() == 1);

  // One SGD step with momentum and decay 0.1 on a linear layer: the weight moves by
  // lr * (g + wd * w), the bias by lr * g.
  auto lin = nn::Linear(nn::LinearOptions(3, 2));
  const Tensor w0 = lin->weight.clone(), b0 = lin->bias.clone();
  auto opt = optim::make_with_decay_groups<optim::SGD>(
      lin->parameters(), optim::SGDOptions(0.5).momentum(0.9).weight_decay(0.1));
  REQUIRE(opt->num_param_groups() == 2);
  CHECK(opt->options(0).weight_decay() == 0.1);
  CHECK(opt->options(1).weight_decay() == 0.0);
  const Tensor x = from_vector<float>({1, 2, 3, -1, 0, 2}, {2, 3});
  sum(lin(x)).backward();
  const Tensor gw = lin->weight.grad().clone(), gb = lin->bias.grad().clone();
  opt->step();
  CHECK(max_diff(lin->weight, sub(w0, mul(add(gw, mul(w0, 0.1)), 0.5))) < 1e-6);
  CHECK(max_diff(lin->bias, sub(b0, mul(gb, 0.5))) < 1e-6);
  // The scheduler scales both groups.
  optim::CosineWithWarmup sched(*opt, 2, 10);
  sched.step();
  CHECK(opt->get_lr(0) == Approx(0.25));
  CHECK(opt->get_lr(1) == Approx(0.25));
}

TEST_CASE("vision recipe: replicas normalise with their own micro-batch statistics",
          "[runtime][vision]") {
  const int64_t micro = 4, replicas = 2;
  Tensor x = mul(randn({micro * replicas, 3, 5, 5}), 1.0);
  // The second replica's images are shifted and scaled, so its batch statistics differ.
  x = cat({x.narrow(0, 0, micro), add(mul(x.narrow(0, micro, micro), 3.0), 2.0)}, 0);
  const Tensor y = from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1}, {8});
  auto loss_fn = [](const Tensor& out, const Tensor& t) { return cross_entropy(out, t); };

  manual_seed(5);
  auto net = small_bn_net();
  optim::SGD sgd(net->parameters(), optim::SGDOptions(0.1));
  auto tm = trainingModel(net.ptr(), Options().replicationFactor(replicas).useIpuModel(false), sgd,
                          loss_fn);
  tm(x, y);

  // Replica-local reference, eager: each replica's loss on its own micro-batch, gradients
  // averaged over the replicas, one SGD step. Each replica keeps its own running statistics,
  // and the model holds replica 0's: what replica 0's micro-batch alone makes of them.
  manual_seed(5);
  auto ref = small_bn_net();
  const auto params = ref->parameters();
  std::vector<Tensor> grads(params.size());
  std::vector<std::pair<std::string, Tensor>> want_b;
  for (int64_t r = 0; r < replicas; ++r) {
    for (auto p : params) p.set_grad(Tensor());
    loss_fn(ref(x.narrow(0, r * micro, micro)), y.narrow(0, r * micro, micro)).backward();
    if (r == 0)
      for (auto& [name, b] : ref->named_buffers()) want_b.emplace_back(name, b.clone());
    for (size_t i = 0; i < params.size(); ++i)
      grads[i] = grads[i].defined() ? add(grads[i], params[i].grad()) : params[i].grad().clone();
  }
  {
    NoGradGuard ng;
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor p = params[i];
      p.sub_(mul(grads[i], 0.1 / replicas));
    }
  }
  const auto got = net->named_parameters(), want = ref->named_parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    CHECK(max_diff(got[i].second, want[i].second) < 1e-5);
  }
  const auto got_b = net->named_buffers();
  REQUIRE(got_b.size() == want_b.size());
  for (size_t i = 0; i < got_b.size(); ++i) {
    INFO(got_b[i].first);
    if (got_b[i].second.dtype() == kFloat32)
      CHECK(max_diff(got_b[i].second, want_b[i].second) < 1e-5);
  }

  // Normalising the whole combined batch at once gives another update: the test can tell.
  manual_seed(5);
  auto whole = small_bn_net();
  loss_fn(whole(x), y).backward();
  {
    NoGradGuard ng;
    for (auto p : whole->parameters()) p.sub_(mul(p.grad(), 0.1));
  }
  CHECK(max_diff(whole->named_parameters()[0].second, got[0].second) > 1e-4);
}
