// SambaNova's starter models (models/lenet.hpp, ffn_mnist.hpp, logistic_regression.hpp):
// checkpoint names, shapes and reprs, initialisation, config and input errors named, and logits,
// loss, every parameter's whole gradient and one SGD step with the starters' hyperparameters
// against PyTorch 1.13 (tests/golden/sambanova_starters.json, made by gen_sambanova_starters.py).
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/models/models.hpp>

#include "../support/error_of.hpp"
#include "../support/golden.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace ipuml;
using namespace ipuml::models;
using ipuml::testing::error_of;
using ipuml::testing::formula_weights;
using ipuml::testing::require_close;
using nlohmann::json;

namespace {

// gen_sambanova_starters.py's input: element i = 0.5 + 0.5 cos(0.011 i + 0.3).
Tensor formula_input(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(0.5 + 0.5 * std::cos(0.011 * static_cast<double>(i) + 0.3));
  return from_vector(v, shape);
}

// One starter behind one interface: the module, and its forward(x, labels) -> (loss, logits).
struct Starter {
  std::shared_ptr<nn::Module> module;
  std::function<std::pair<Tensor, Tensor>(const Tensor&, const Tensor&)> forward;
};

template <typename Holder>
Starter starter(Holder net) {
  return {net.ptr(), [net](const Tensor& x, const Tensor& y) { return net->forward(x, y); }};
}

Starter build(const json& c) {
  const std::string model = c.at("model");
  const json& o = c.at("config");
  if (model == "lenet") return starter(LeNet(LeNetConfig().num_classes(o.at("num_classes"))));
  if (model == "ffn_mnist")
    return starter(FFNLogReg(FfnMnistConfig()
                                 .num_features(o.at("num_features"))
                                 .ffn_dim_1(o.at("ffn_dim_1"))
                                 .ffn_dim_2(o.at("ffn_dim_2"))
                                 .num_classes(o.at("num_classes"))));
  REQUIRE(model == "logreg");
  return starter(LogReg(LogRegConfig()
                            .num_features(o.at("num_features"))
                            .num_classes(o.at("num_classes"))
                            .bias(o.at("bias"))));
}

int64_t count_params(const nn::Module& m) {
  int64_t n = 0;
  for (auto& p : m.parameters()) n += p.numel();
  return n;
}

double sample_std(const Tensor& t) {
  const auto v = t.to_vector<double>();
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / static_cast<double>(v.size() - 1));
}

double max_abs(const Tensor& t) { return amax(abs(t)).item<float>(); }

}  // namespace

TEST_CASE("SambaNova starters: the originals' parameter names and shapes", "[zoo][sambanova]") {
  LeNet lenet;
  std::vector<std::string> keys;
  for (auto& [k, t] : lenet->state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"conv1.weight", "conv2.weight", "fc1.weight", "fc1.bias",
                                         "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"});
  CHECK(lenet->conv1->weight.shape() == Shape{6, 1, 3, 3});
  CHECK(lenet->conv2->weight.shape() == Shape{16, 6, 3, 3});
  CHECK(lenet->fc1->weight.shape() == Shape{120, 784});
  CHECK(count_params(*lenet.ptr()) == 54 + 864 + 784 * 120 + 120 + 120 * 84 + 84 + 84 * 10 + 10);
  CHECK(LeNet(LeNetConfig().num_classes(3))->fc3->weight.shape() == Shape{3, 84});

  FFNLogReg ffn;  // ffn_mnist.py's defaults: 784 -> 32 -> 32 -> 10, no biases
  keys.clear();
  for (auto& [k, t] : ffn->state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"ffn.gemm1.weight", "ffn.gemm2.weight",
                                         "logreg.lin_layer.weight"});
  CHECK(count_params(*ffn.ptr()) == 784 * 32 + 32 * 32 + 32 * 10);
  CHECK(ffn->logreg->config.num_features() == 32);

  LogReg logreg;  // logreg.py's defaults: 784 -> 10, no bias unless --bias
  CHECK(logreg->state_dict().size() == 1);
  CHECK(logreg->lin_layer->weight.shape() == Shape{10, 784});
  CHECK(LogReg(LogRegConfig().bias(true))->state_dict().size() == 2);

  // forward(x) gives logits; forward(x, labels) the original's (loss, logits).
  Generator g(2);
  const Tensor labels = from_vector(std::vector<int64_t>{1, 4, 9}, {3});
  const Tensor images = uniform({3, 1, 28, 28}, 0.0, 1.0, &g);
  auto [loss, logits] = lenet->forward(images, labels);
  CHECK(logits.shape() == Shape{3, 10});
  CHECK(max_abs(sub(logits, lenet(images))) == 0.0);
  CHECK(loss.item<float>() == lenet_loss(logits, labels).item<float>());
  const Tensor flat = uniform({3, 784}, 0.0, 1.0, &g);
  auto [ffn_loss, ffn_logits] = ffn->forward(flat, labels);
  CHECK(ffn_logits.shape() == Shape{3, 10});
  CHECK(ffn_loss.item<float>() == ffn_mnist_loss(ffn_logits, labels).item<float>());
  auto [lr_loss, lr_logits] = logreg->forward(flat, labels);
  CHECK(lr_loss.item<float>() == logreg_loss(lr_logits, labels).item<float>());
  CHECK(lenet(zeros({0, 1, 28, 28})).shape() == Shape{0, 10});
}

TEST_CASE("SambaNova starters: initialised as the originals are", "[zoo][sambanova]") {
  manual_seed(12);
  // FFNLogReg's _init_params: xavier_normal_ on every parameter, std sqrt(2 / (fan_in + fan_out)).
  FFNLogReg ffn;
  CHECK(sample_std(ffn->ffn->gemm1->weight) == Approx(std::sqrt(2.0 / (784 + 32))).epsilon(0.03));
  CHECK(sample_std(ffn->ffn->gemm2->weight) == Approx(std::sqrt(2.0 / (32 + 32))).epsilon(0.1));
  // Gaussian, not the default uniform: some weights lie beyond the uniform init's bound.
  CHECK(max_abs(ffn->ffn->gemm1->weight) > 1.0 / std::sqrt(784.0));
  // LeNet and LogReg keep PyTorch's defaults: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  LeNet lenet;
  CHECK(max_abs(lenet->conv1->weight) <= 1.0 / 3.0);
  CHECK(max_abs(lenet->fc1->weight) <= 1.0 / 28.0);
  CHECK(max_abs(lenet->fc1->bias) <= 1.0 / 28.0);
  LogReg logreg;
  CHECK(max_abs(logreg->lin_layer->weight) <= 1.0 / 28.0);
  CHECK(sample_std(logreg->lin_layer->weight) == Approx(1.0 / 28.0 / std::sqrt(3.0)).epsilon(0.05));
}

TEST_CASE("SambaNova starters: bad configs and inputs are refused by name", "[zoo][sambanova]") {
  CHECK_THAT(error_of([] { LeNet net(LeNetConfig().num_classes(0)); }),
             Catch::Contains("LeNetConfig: num_classes must be in [1, 1048576], got 0"));
  CHECK_THAT(error_of([] { LogReg net(LogRegConfig().num_features(-3)); }),
             Catch::Contains("LogRegConfig: num_features must be in [1, 1048576], got -3"));
  CHECK_THAT(error_of([] { LogReg net(LogRegConfig().num_classes(int64_t{1} << 40)); }),
             Catch::Contains("LogRegConfig: num_classes must be in [1, 1048576], got "
                             "1099511627776"));
  for (const char* field : {"num_features", "ffn_dim_1", "ffn_dim_2", "num_classes"}) {
    FfnMnistConfig c;
    const std::string f = field;
    if (f == "num_features") c.num_features(0);
    if (f == "ffn_dim_1") c.ffn_dim_1(0);
    if (f == "ffn_dim_2") c.ffn_dim_2(0);
    if (f == "num_classes") c.num_classes(0);
    CHECK_THAT(error_of([&] { FFNLogReg net(c); }),
               Catch::Contains("FfnMnistConfig: " + f + " must be in [1, 1048576], got 0"));
  }

  LeNet lenet;
  CHECK_THAT(error_of([&] {
               lenet(randn({2, 784}));
             }),
             Catch::Contains("LeNet: expected images [batch, 1, 28, 28] (a 4-d input), got a 2-d "
                             "input of shape [2, 784]"));
  CHECK_THAT(error_of([&] {
               lenet(randn({1, 28, 28}));
             }),
             Catch::Contains("got a 3-d input of shape [1, 28, 28]"));
  CHECK_THAT(
      error_of([&] {
        lenet(randn({2, 3, 28, 28}));
      }),
      Catch::Contains("LeNet: expected 1 input channel, got 3 (input shape [2, 3, 28, 28])"));
  CHECK_THAT(error_of([&] {
               lenet(randn({2, 1, 32, 32}));
             }),
             Catch::Contains("LeNet: expected 28 x 28 images (fc1 takes 16 x 7 x 7 features), got "
                             "32 x 32 (input shape [2, 1, 32, 32])"));
  CHECK_THAT(error_of([&] { lenet(randn({2, 1, 28, 27})); }), Catch::Contains("got 28 x 27"));
  // Labels that do not fit the batch are the loss's to refuse.
  CHECK(error_of([&] {
          lenet->forward(randn({2, 1, 28, 28}), from_vector(std::vector<int64_t>{1, 2, 3}, {3}));
        }) != "(no error)");

  LogReg logreg;
  CHECK_THAT(error_of([&] {
               logreg(randn({2, 1, 28, 28}));
             }),
             Catch::Contains("LogReg: expected an input [batch, num_features=784] (a 2-d input; "
                             "flatten images first), got a 4-d input of shape [2, 1, 28, 28]"));
  CHECK_THAT(error_of([&] {
               logreg(randn({2, 783}));
             }),
             Catch::Contains("LogReg: expected num_features=784 values per sample, got 783 (input "
                             "shape [2, 783])"));
  FFNLogReg ffn;
  CHECK_THAT(error_of([&] { ffn(randn({784})); }),
             Catch::Contains("FFNLogReg: expected an input [batch, num_features=784] (a 2-d "
                             "input; flatten images first), got a 1-d input of shape [784]"));
  CHECK_THAT(error_of([&] {
               ffn(randn({5, 785}));
             }),
             Catch::Contains("FFNLogReg: expected num_features=784 values per sample, got 785"));
}

TEST_CASE("SambaNova starters: logits loss gradients and an SGD step match PyTorch",
          "[zoo][sambanova][golden]") {
  const json g = ipuml::testing::load_golden("sambanova_starters.json");
  REQUIRE(g.at("cases").size() == 4);
  for (const json& c : g.at("cases")) {
    INFO(c.at("model") << " " << c.at("config").dump());
    Starter s = build(c);
    nn::Module& net = *s.module;
    CHECK(net.to_string() == c.at("repr").get<std::string>());
    std::vector<std::string> keys;
    for (auto& [k, t] : net.state_dict()) {
      keys.push_back(k);
      CHECK(t.shape() == c.at("shapes").at(k).get<Shape>());
    }
    REQUIRE(keys == c.at("keys").get<std::vector<std::string>>());

    nn::StateDict d;
    int k = 0;
    for (auto& [name, p] : net.named_parameters())
      d.emplace_back(name, formula_weights(k++, p.shape()));
    net.load_state_dict(d);

    const Tensor x = formula_input(c.at("input_shape").get<Shape>());
    const auto label_values = c.at("labels").get<std::vector<int64_t>>();
    const Tensor labels = from_vector(label_values, {static_cast<int64_t>(label_values.size())});
    optim::SGD sgd(net.parameters(), optim::SGDOptions(c.at("lr").get<double>())
                                         .momentum(c.at("momentum").get<double>())
                                         .weight_decay(c.at("weight_decay").get<double>()));
    sgd.zero_grad();
    auto [loss, logits] = s.forward(x, labels);
    require_close(logits, c.at("logits"), 1e-5, 1e-5, "logits");
    CHECK(loss.item<float>() == Approx(c.at("loss").get<double>()).epsilon(1e-5));
    loss.backward();
    REQUIRE(c.at("grads").size() == net.parameters().size());
    for (auto& [name, p] : net.named_parameters())
      require_close(p.grad(), c.at("grads").at(name), 1e-6, 1e-4, name + " gradient");
    sgd.step();
    NoGradGuard no_grad;
    require_close(s.forward(x, labels).second, c.at("logits_after"), 2e-5, 1e-5,
                  "logits after the step");
  }
}
