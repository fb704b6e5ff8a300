// Cerebras modelzoo's fc_mnist MLP (models/fc_mnist.hpp): checkpoint names and shapes, config
// errors, the forward pass against a hand computation and against PyTorch 1.13
// (tests/golden/fc_mnist.json, made by gen_fc_mnist.py) with one SGD step, training on a
// learnable synthetic problem, and the emulated IPU giving the cpu's numbers.
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/models/models.hpp>

#include "../support/error_of.hpp"
#include "../support/golden.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace ipuml;
using namespace ipuml::models;
using ipuml::testing::error_of;
using ipuml::testing::formula_weights;
using ipuml::testing::require_close;
using nlohmann::json;

namespace {

// gen_fc_mnist.py's input: 0.5 + 0.5 cos(0.011 i + 0.3).
Tensor formula_input() {
  std::vector<float> v(4 * 784);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(0.5 + 0.5 * std::cos(0.011 * static_cast<double>(i) + 0.3));
  return from_vector(v, {4, 1, 28, 28});
}

void load_formula_weights(FcMnist& net) {
  nn::StateDict d;
  int k = 0;
  for (auto& [name, p] : net->named_parameters())
    d.emplace_back(name, formula_weights(k++, p.shape()));
  net->load_state_dict(d);
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return amax(abs(sub(a, b))).item<float>(); }

}  // namespace

TEST_CASE("fc_mnist: modelzoo's parameter names and shapes", "[zoo][fc_mnist]") {
  FcMnist net;  // the public config: depth 3 x 128, dropout 0.2, relu
  std::vector<std::string> keys;
  std::vector<Shape> shapes;
  int64_t count = 0;
  for (auto& [name, t] : net->state_dict()) {
    keys.push_back(name);
    shapes.push_back(t.shape());
    count += t.numel();
  }
  CHECK(keys == std::vector<std::string>{"fc_layers.0.weight", "fc_layers.0.bias",
                                         "fc_layers.1.weight", "fc_layers.1.bias",
                                         "fc_layers.2.weight", "fc_layers.2.bias",
                                         "last_layer.weight", "last_layer.bias"});
  CHECK(shapes == std::vector<Shape>{
                      {128, 784}, {128}, {128, 128}, {128}, {128, 128}, {128}, {10, 128}, {10}});
  CHECK(count == 784 * 128 + 128 + 2 * (128 * 128 + 128) + 128 * 10 + 10);
  CHECK(count == net->config.num_parameters());
  CHECK(net->dropout->options.p() == 0.2);
  CHECK(net->nonlin->type_name() == "ReLU");

  // The other spelling of the same sizes, and a list of different widths.
  CHECK(FcMnistConfig().depth_and_hidden_size(3, 128).hidden_sizes() ==
        std::vector<int64_t>{128, 128, 128});
  FcMnist uneven(FcMnistConfig().hidden_sizes({64, 32}).activation_fn("gelu"));
  CHECK(uneven->fc_layers->size() == 2);
  CHECK(uneven->last_layer->weight.shape() == Shape{10, 32});
  CHECK(uneven->nonlin->type_name() == "GELU");
  // No hidden layer: last_layer alone, as modelzoo's loop would build it.
  FcMnist linear(FcMnistConfig().hidden_sizes({}));
  CHECK(linear->parameters().size() == 2);
  CHECK(linear(randn({3, 784})).shape() == Shape{3, 10});
}

TEST_CASE("fc_mnist: bad configs and inputs are refused before allocating", "[zoo][fc_mnist]") {
  auto built = [](const FcMnistConfig& c) { return error_of([&] { FcMnist net(c); }); };
  CHECK_THAT(built(FcMnistConfig().hidden_sizes({128, 0})),
             Catch::Contains("hidden sizes must be in [1, 1048576], got 0"));
  CHECK_THAT(built(FcMnistConfig().hidden_sizes({-5})),
             Catch::Contains("hidden sizes must be in [1, 1048576], got -5"));
  CHECK_THAT(built(FcMnistConfig().dropout(1.0)),
             Catch::Contains("dropout must be in [0, 1), got 1"));
  CHECK_THAT(built(FcMnistConfig().dropout(std::nan(""))), Catch::Contains("dropout must be in"));
  CHECK_THAT(built(FcMnistConfig().activation_fn("swish")),
             Catch::Contains("activation_fn 'swish' is not one of relu, tanh, gelu, sigmoid"));
  CHECK_THAT(built(FcMnistConfig().input_size(0)), Catch::Contains("input_size and num_classes"));
  CHECK_THAT(error_of([] { FcMnistConfig().depth_and_hidden_size(int64_t{1} << 40, 8); }),
             Catch::Contains("depth must be in [0, 4096], got 1099511627776"));
  CHECK_THAT(built(FcMnistConfig().depth_and_hidden_size(4096, 1 << 20)),
             Catch::Contains("4096 hidden layers (the widest 1048576) need 4502505243279370 "
                             "parameters, expected at most 2^32"));
  CHECK_THAT(built(FcMnistConfig().hidden_sizes(std::vector<int64_t>(4097, 1))),
             Catch::Contains("4097 hidden layers, expected at most 4096"));
  FcMnist net(FcMnistConfig().hidden_sizes({4}));
  CHECK_THAT(error_of([&] {
               net(randn({2, 28, 27}));
             }),
             Catch::Contains("FcMnist: expected an input [batch, ...] of 784 values per sample, "
                             "got shape [2, 28, 27]"));
  CHECK_THAT(error_of([&] { net(randn({784})); }), Catch::Contains("got shape [784]"));
  CHECK(net(zeros({0, 784})).shape() == Shape{0, 10});
}

TEST_CASE("fc_mnist: forward equals a hand computation from the same weights", "[zoo][fc_mnist]") {
  manual_seed(3);
  FcMnist net(FcMnistConfig().hidden_sizes({7, 5}).dropout(0.5));
  net->eval();  // dropout off, as at evaluation
  Generator g(4);
  const Tensor x = uniform({3, 1, 28, 28}, 0.0, 1.0, &g);
  const Tensor y = net(x);
  REQUIRE(y.shape() == Shape{3, 10});

  // Linear + relu in double, layer by layer, from the module's own tensors.
  auto linear = [](const std::vector<double>& in, int64_t n_in, const Tensor& w, const Tensor& b,
                   bool relu) {
    const auto wv = w.to_vector<double>(), bv = b.to_vector<double>();
    const int64_t n_out = w.size(0), batch = static_cast<int64_t>(in.size()) / n_in;
    std::vector<double> out(static_cast<size_t>(batch * n_out));
    for (int64_t s = 0; s < batch; ++s)
      for (int64_t o = 0; o < n_out; ++o) {
        double acc = bv[static_cast<size_t>(o)];
        for (int64_t i = 0; i < n_in; ++i)
          acc += in[static_cast<size_t>(s * n_in + i)] * wv[static_cast<size_t>(o * n_in + i)];
        out[static_cast<size_t>(s * n_out + o)] = relu ? std::max(acc, 0.0) : acc;
      }
    return out;
  };
  std::vector<double> h = x.to_vector<double>();
  int64_t width = 784;
  for (size_t l = 0; l < net->fc_layers->size(); ++l) {
    auto& layer = net->fc_layers->at<nn::LinearImpl>(l);
    h = linear(h, width, layer.weight, layer.bias, true);
    width = layer.weight.size(0);
  }
  const std::vector<double> z =
      linear(h, width, net->last_layer->weight, net->last_layer->bias, false);
  const auto got = y.to_vector<float>();
  for (int64_t s = 0; s < 3; ++s) {
    double m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < 10; ++c) m = std::max(m, z[static_cast<size_t>(s * 10 + c)]);
    for (int64_t c = 0; c < 10; ++c) sum += std::exp(z[static_cast<size_t>(s * 10 + c)] - m);
    for (int64_t c = 0; c < 10; ++c) {
      const double expect = z[static_cast<size_t>(s * 10 + c)] - m - std::log(sum);
      CHECK(got[static_cast<size_t>(s * 10 + c)] == Approx(expect).margin(1e-5));
    }
  }
  // The loss is NLLLoss on these log-probabilities.
  const Tensor labels = from_vector(std::vector<int64_t>{2, 9, 0}, {3});
  const double nll = -(got[2] + got[19] + got[20]) / 3.0;
  CHECK(fc_mnist_loss(y, labels).item<float>() == Approx(nll).margin(1e-6));
}

TEST_CASE("fc_mnist: forward, gradients and an SGD step match PyTorch", "[zoo][fc_mnist][golden]") {
  const json g = ipuml::testing::load_golden("fc_mnist.json");
  for (const json& c : g.at("cases")) {
    const std::string act = c.at("activation");
    INFO("activation " << act);
    FcMnist net(FcMnistConfig()
                    .hidden_sizes(c.at("hidden_sizes").get<std::vector<int64_t>>())
                    .dropout(0.0)
                    .activation_fn(act));
    CHECK(net->to_string() == c.at("repr").get<std::string>());
    std::vector<std::string> keys;
    for (auto& [k, t] : net->state_dict()) {
      keys.push_back(k);
      CHECK(t.shape() == c.at("shapes").at(k).get<Shape>());
    }
    CHECK(keys == c.at("keys").get<std::vector<std::string>>());

    load_formula_weights(net);
    const Tensor x = formula_input();
    const Tensor labels = from_vector(std::vector<int64_t>{3, 7, 1, 0}, {4});
    const double lr = c.at("lr");
    optim::SGD sgd(net->parameters(), optim::SGDOptions(lr));
    sgd.zero_grad();
    const Tensor out = net(x);
    require_close(out, c.at("output"), 1e-5, 1e-5, "output");
    const Tensor loss = fc_mnist_loss(out, labels);
    CHECK(loss.item<float>() == Approx(c.at("loss").get<double>()).epsilon(1e-5));
    loss.backward();
    for (auto& [k, p] : net->named_parameters())
      if (c.at("grads").contains(k)) require_close(p.grad(), c.at("grads").at(k), 1e-6, 1e-4, k);
    sgd.step();
    for (auto& [k, p] : net->named_parameters())
      if (c.at("after").contains(k)) require_close(p, c.at("after").at(k), 1e-6, 1e-5, k);
    NoGradGuard no_grad;
    require_close(net(x), c.at("output_after"), 2e-5, 1e-5, "output after the step");
  }
}

TEST_CASE("fc_mnist: trains on a learnable synthetic problem", "[zoo][fc_mnist]") {
  // Ten classes, each a random 784-pixel prototype; samples are prototypes plus noise.
  manual_seed(5);
  Generator g(6);
  const Tensor prototypes = uniform({10, 784}, 0.0, 1.0, &g);
  const int64_t n = 512;
  const Tensor labels = randint(0, 10, {n}, &g);
  const Tensor x =
      add(index_select(prototypes, 0, labels), mul(randn({n, 784}, &g), full({}, 0.5)));
  FcMnist net(FcMnistConfig().hidden_sizes({32, 32}).dropout(0.1));
  optim::Adam adam(net->parameters(), optim::AdamOptions(1e-3));
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    const int64_t at = (step * 64) % n;
    const Tensor xb = narrow(x, 0, at, 64), yb = narrow(labels, 0, at, 64);
    adam.zero_grad();
    const Tensor loss = fc_mnist_loss(net(xb), yb);
    loss.backward();
    adam.step();
    (step == 0 ? first : last) = loss.item<float>();
  }
  INFO("loss " << first << " -> " << last);
  CHECK(first > 1.5f);
  CHECK(last < 0.05f);
  net->eval();
  NoGradGuard no_grad;
  const Tensor predicted = argmax(net(x), 1);
  const double accuracy =
      sum(eq(predicted, labels).to(kFloat32)).item<float>() / static_cast<double>(n);
  CHECK(accuracy > 0.99);
}

TEST_CASE("fc_mnist: compiled training on the emulated IPU gives the cpu's numbers",
          "[zoo][fc_mnist][ipu]") {
  Generator g(8);
  const Tensor x = uniform({16, 1, 28, 28}, 0.0, 1.0, &g);
  const Tensor y = randint(0, 10, {16}, &g);
  std::vector<std::vector<float>> losses;
  std::vector<nn::StateDict> states;
  std::vector<std::vector<float>> outputs;
  for (const bool ipu : {false, true}) {
    INFO((ipu ? "ipu" : "cpu"));
    manual_seed(9);
    FcMnist net(FcMnistConfig().hidden_sizes({32, 16}).dropout(0.2));
    optim::SGD sgd(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    auto tm = trainingModel(
        net.ptr(), Options().useIpuModel(ipu).randomSeed(3).showCompilationProgressBar(false), sgd,
        fc_mnist_loss);
    std::vector<float> l;
    for (int step = 0; step < 4; ++step) l.push_back(tm(x, y).to_vector<float>()[0]);
    // Only a backend that models a device reports simulated time: this ran on the emulator.
    CHECK(tm.last_stats().simulated_seconds.has_value() == ipu);
    losses.push_back(l);
    states.push_back(net->state_dict());
    net->eval();
    auto im =
        inferenceModel(net.ptr(), Options().useIpuModel(ipu).showCompilationProgressBar(false));
    outputs.push_back(im(x).to_vector<float>());
  }
  INFO("cpu losses " << losses[0][0] << " " << losses[0][3] << ", ipu " << losses[1][0] << " "
                     << losses[1][3]);
  CHECK(losses[0].back() < losses[0].front());
  for (size_t i = 0; i < losses[0].size(); ++i)
    CHECK(losses[1][i] == Approx(losses[0][i]).epsilon(1e-4));
  REQUIRE(states[0].size() == states[1].size());
  for (size_t i = 0; i < states[0].size(); ++i) {
    INFO(states[0][i].first);
    CHECK(max_abs_diff(states[0][i].second, states[1][i].second) < 1e-4);
  }
  REQUIRE(outputs[0].size() == outputs[1].size());
  for (size_t i = 0; i < outputs[0].size(); ++i)
    CHECK(outputs[1][i] == Approx(outputs[0][i]).margin(1e-4));
}
