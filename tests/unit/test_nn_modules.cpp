// nn modules: forwards against the functional ops, train()/eval(), shapes (batched and
// unbatched), gradients reaching parameters, and the errors bad options and inputs raise.
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/nn/nn.hpp>

using namespace ipuml;
using Catch::Matchers::Contains;
namespace F = ipuml::nn::functional;

namespace {
void require_equal(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  for (size_t i = 0; i < va.size(); ++i) REQUIRE(va[i] == Approx(vb[i]).margin(1e-6));
}
}  // namespace

TEST_CASE("nn layers forward as their functional op", "[nn]") {
  manual_seed(11);
  SECTION("Linear, with and without bias, on 2-d and 3-d inputs") {
    nn::Linear fc(5, 3);
    Tensor x = randn({4, 5});
    require_equal(fc(x), F::linear(x, fc->weight, fc->bias));
    Tensor x3 = randn({2, 4, 5});
    CHECK(fc(x3).shape() == Shape{2, 4, 3});
    nn::Linear nb(nn::LinearOptions(5, 3).bias(false));
    CHECK_FALSE(nb->bias.defined());
    CHECK(nb->parameters().size() == 1);
    require_equal(nb(x), F::linear(x, nb->weight));
  }
  SECTION("Conv2d and Conv1d pass stride, padding, dilation and groups") {
    nn::Conv2d conv(
        nn::Conv2dOptions(4, 6, {3, 2}).stride({2, 1}).padding(1).dilation({1, 2}).groups(2));
    Tensor x = randn({2, 4, 9, 8});
    require_equal(conv(x), F::conv2d(x, conv->weight, conv->bias, {2, 1}, {1, 1}, {1, 2}, 2));
    // Unbatched input: [C, H, W] -> [O, H', W'].
    require_equal(conv(x.select(0, 1)), conv(x).select(0, 1));
    nn::Conv1d c1(nn::Conv1dOptions(3, 5, 4).stride(2).bias(false));
    Tensor y = randn({2, 3, 20});
    require_equal(c1(y), F::conv1d(y, c1->weight, Tensor(), 2));
    CHECK(c1(y).shape() == Shape{2, 5, 9});
  }
  SECTION("pooling") {
    Tensor x = randn({2, 3, 8, 7});
    require_equal(nn::MaxPool2d(2)(x), F::max_pool2d(x, {2, 2}));
    require_equal(nn::MaxPool2d(nn::MaxPool2dOptions({3, 2}).stride(1).padding({1, 0}))(x),
                  F::max_pool2d(x, {3, 2}, {1, 1}, {1, 0}));
    require_equal(nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1))(x),
                  F::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}));
    require_equal(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 1}))(x),
                  F::adaptive_avg_pool2d(x, {1, 1}));
    Tensor s = randn({2, 4, 1600});
    require_equal(nn::MaxPool1d(4)(s), F::max_pool1d(s, 4));
    CHECK(nn::MaxPool1d(4)(s).shape() == Shape{2, 4, 400});
    CHECK(nn::MaxPool2d(2)(x.select(0, 0)).shape() == Shape{3, 4, 3});
  }
  SECTION("norms, embedding, activations, flatten") {
    Tensor x = randn({3, 6, 5});
    nn::GroupNorm gn(3, 6);
    require_equal(gn(x), F::group_norm(x, 3, gn->weight, gn->bias));
    nn::LayerNorm ln(nn::LayerNormOptions({6, 5}).eps(1e-3));
    require_equal(ln(x), F::layer_norm(x, {6, 5}, ln->weight, ln->bias, 1e-3));
    nn::Embedding emb(10, 4);
    Tensor idx = from_vector<int64_t>({1, 9, 0, 1}, {2, 2});
    require_equal(emb(idx), F::embedding(idx, emb->weight));
    CHECK(emb(idx).shape() == Shape{2, 2, 4});
    require_equal(nn::ReLU()(x), F::relu(x));
    require_equal(nn::GELU()(x), F::gelu(x));
    require_equal(nn::GELU(nn::GELUOptions().approximate("tanh"))(x), F::gelu(x, "tanh"));
    require_equal(nn::Tanh()(x), F::tanh(x));
    require_equal(nn::Sigmoid()(x), F::sigmoid(x));
    require_equal(nn::Softmax(1)(x), F::softmax(x, 1));
    require_equal(nn::LogSoftmax(-1)(x), F::log_softmax(x, -1));
    CHECK(nn::Flatten()(x).shape() == Shape{3, 30});
    CHECK(nn::Flatten(nn::FlattenOptions().start_dim(0).end_dim(1))(x).shape() == Shape{18, 5});
    CHECK(nn::Identity()(x).same(x));
  }
}

TEST_CASE("nn gradients reach every parameter", "[nn]") {
  manual_seed(12);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(2, 4, 3).padding(1)), nn::BatchNorm2d(4),
                     nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(4 * 3 * 3, 5),
                     nn::LayerNorm(5));
  Tensor x = randn({3, 2, 6, 6});
  Tensor target = from_vector<int64_t>({0, 4, 2}, {3});
  nn::CrossEntropyLoss loss;
  loss(net(x), target).backward();
  for (auto& [name, p] : net->named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().shape() == p.shape());
  }
  net->zero_grad();
  for (auto& p : net->parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("nn Embedding padding_idx row gets no gradient", "[nn]") {
  manual_seed(13);
  nn::Embedding emb(nn::EmbeddingOptions(5, 3).padding_idx(2));
  {
    NoGradGuard ng;
    emb->weight.select(0, 2).fill_(0.5);  // a loaded, non-zero padding row is still returned
  }
  Tensor idx = from_vector<int64_t>({2, 1, 2, 4}, {4});
  Tensor y = emb(idx);
  for (float v : y.select(0, 0).to_vector<float>()) CHECK(v == 0.5f);
  sum(y).backward();
  auto g = emb->weight.grad().to_vector<float>();
  for (int64_t j = 0; j < 3; ++j) {
    CHECK(g[2 * 3 + j] == 0.0f);  // padding row
    CHECK(g[1 * 3 + j] == 1.0f);
    CHECK(g[4 * 3 + j] == 1.0f);
    CHECK(g[0 * 3 + j] == 0.0f);
  }
}

TEST_CASE("nn Dropout and BatchNorm follow train()/eval()", "[nn]") {
  manual_seed(14);
  nn::Sequential net(nn::Linear(8, 8), nn::Dropout(0.5), nn::BatchNorm1d(8));
  CHECK(net->is_training());
  Tensor x = randn({16, 8});
  nn::Dropout drop(0.5);
  Tensor ones8 = ones({64, 64});
  Tensor d = drop(ones8);
  int zeros_seen = 0;
  for (float v : d.to_vector<float>()) {
    CHECK((v == 0.0f || v == 2.0f));
    zeros_seen += v == 0.0f;
  }
  CHECK(zeros_seen > 64 * 64 * 4 / 10);
  CHECK(zeros_seen < 64 * 64 * 6 / 10);
  // Same seed, same mask.
  manual_seed(99);
  Tensor m1 = drop(ones8);
  manual_seed(99);
  Tensor m2 = drop(ones8);
  CHECK(m1.to_vector<float>() == m2.to_vector<float>());

  net->eval();
  for (auto& [name, m] : net->named_modules()) CHECK_FALSE(m->is_training());
  CHECK(drop->is_training());
  drop->eval();
  require_equal(drop(ones8), ones8);

  auto& bn = net->at<nn::BatchNorm1dImpl>(2);
  NoGradGuard ng;
  Tensor before = bn.running_mean.clone();
  net(x);
  CHECK(bn.running_mean.to_vector<float>() == before.to_vector<float>());  // eval: untouched
  CHECK(bn.num_batches_tracked.item<int64_t>() == 0);
  net->train();
  net(x);
  net(x);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);
  CHECK(bn.running_mean.to_vector<float>() != before.to_vector<float>());
}

TEST_CASE("nn Sequential and ModuleList name, chain and index their children", "[nn]") {
  manual_seed(15);
  nn::Sequential seq;
  CHECK(seq->is_empty());
  Tensor x = randn({2, 3});
  CHECK(seq(x).same(x));
  nn::Linear first(3, 4);
  seq->push_back(first);
  seq->push_back(nn::ReLU());
  seq->push_back(std::make_shared<nn::LinearImpl>(4, 2));
  CHECK(seq->size() == 3);
  std::vector<std::string> names;
  for (auto& [name, m] : *seq) names.push_back(name);
  CHECK(names == std::vector<std::string>{"0", "1", "2"});
  CHECK(seq[0].get() == first.ptr().get());
  auto& last = seq->at<nn::LinearImpl>(2);
  require_equal(seq(x), F::linear(F::relu(first(x)), last.weight, last.bias));
  CHECK_THROWS_WITH(seq->at<nn::LinearImpl>(1), Contains("is a ReLU"));
  CHECK_THROWS_WITH(seq->ptr(3), Contains("index 3 is out of range for 3 modules"));

  std::vector<std::string> keys;
  for (auto& [k, v] : seq->named_parameters()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});

  nn::ModuleList list(nn::Linear(2, 2), nn::Tanh());
  list->push_back(nn::Sequential(nn::Linear(2, 1)));
  nn::ModuleList more{nn::ReLU()};
  list->extend(*more);
  CHECK(list->size() == 4);
  keys.clear();
  for (auto& [k, v] : list->state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"0.weight", "0.bias", "2.0.weight", "2.0.bias"});
  CHECK_THROWS_WITH(list(x), Contains("ModuleList: this module has no single-tensor forward"));
}

TEST_CASE("nn state_dict keys, load_state_dict round trip and its errors", "[nn]") {
  struct BlockImpl : nn::Module {
    BlockImpl() : Module("Block") {
      conv = register_module("conv", nn::Conv2d(1, 2, 3));
      bn = register_module("bn", nn::BatchNorm2d(2));
    }
    Tensor forward(const Tensor& x) override { return bn(conv(x)); }
    nn::Conv2d conv{nullptr};
    nn::BatchNorm2d bn{nullptr};
  };
  struct NetImpl : nn::Module {
    NetImpl() : Module("Net") {
      layer1 = register_module("layer1", std::make_shared<BlockImpl>());
      fc = register_module("fc", nn::Linear(2, 3));
    }
    std::shared_ptr<BlockImpl> layer1;
    nn::Linear fc{nullptr};
  };
  manual_seed(16);
  auto a = std::make_shared<NetImpl>();
  manual_seed(17);
  auto b = std::make_shared<NetImpl>();

  std::vector<std::string> keys;
  for (auto& [k, v] : a->state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"layer1.conv.weight", "layer1.conv.bias",
                                         "layer1.bn.weight", "layer1.bn.bias",
                                         "layer1.bn.running_mean", "layer1.bn.running_var",
                                         "layer1.bn.num_batches_tracked", "fc.weight", "fc.bias"});

  Tensor b_weight = b->fc->weight;  // load copies in place: the tensors stay the same objects
  b->load_state_dict(a->state_dict());
  CHECK(b->fc->weight.same(b_weight));
  auto sa = a->state_dict(), sb = b->state_dict();
  for (size_t i = 0; i < sa.size(); ++i) {
    INFO(sa[i].first);
    CHECK(sa[i].second.to_vector<double>() == sb[i].second.to_vector<double>());
  }

  nn::StateDict missing = a->state_dict();
  missing.pop_back();
  CHECK_THROWS_WITH(b->load_state_dict(missing), Contains("missing key 'fc.bias'"));
  b->load_state_dict(missing, /*strict=*/false);

  nn::StateDict extra = a->state_dict();
  extra.emplace_back("fc.scale", ones({3}));
  CHECK_THROWS_WITH(b->load_state_dict(extra), Contains("unexpected key 'fc.scale'"));

  nn::StateDict wrong = a->state_dict();
  for (auto& [k, v] : wrong)
    if (k == "fc.weight") v = zeros({3, 4});
  CHECK_THROWS_WITH(b->load_state_dict(wrong),
                    Contains("'fc.weight' has shape [3, 4]") && Contains("[3, 2]"));
}

TEST_CASE("nn modules reject bad options with messages naming module and values", "[nn]") {
  CHECK_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(3, 8, 3).groups(2)),
                    Contains("Conv2d: in_channels=3 must be divisible by groups=2"));
  CHECK_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(2, 8, 3).stride(2).padding(nn::kSame)),
                    Contains("padding='same' is not supported for strided"));
  CHECK_THROWS_WITH(nn::Conv1d(nn::Conv1dOptions(2, 8, 0)),
                    Contains("kernel_size, stride and dilation must be positive"));
  CHECK_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(1, 2, {3, 3, 3})), Contains("expected 2 values"));
  CHECK_THROWS_WITH(nn::MaxPool2d(nn::MaxPool2dOptions(2).padding(2)),
                    Contains("MaxPool2d: padding must be between 0 and half"));
  CHECK_THROWS_WITH(nn::MaxPool2d(nn::MaxPool2dOptions(2).ceil_mode(true)),
                    Contains("ceil_mode=True is not supported"));
  CHECK_THROWS_WITH(nn::MaxPool1d(nn::MaxPool1dOptions(2).dilation(2)),
                    Contains("MaxPool1d: dilation=[2] is not supported"));
  CHECK_THROWS_WITH(
      nn::GroupNorm(3, 8),
      Contains("GroupNorm: num_channels=8 must be a positive multiple of num_groups=3"));
  CHECK_THROWS_WITH(nn::Dropout(1.5),
                    Contains("Dropout: probability has to be between 0 and 1, got p=1.5"));
  CHECK_THROWS_WITH(nn::GELU(nn::GELUOptions().approximate("fast")),
                    Contains("GELU: approximate must be 'none' or 'tanh', got 'fast'"));
  CHECK_THROWS_WITH(nn::Embedding(nn::EmbeddingOptions(4, 2).padding_idx(4)),
                    Contains("padding_idx=4 must be within num_embeddings=4"));
  CHECK_THROWS_WITH(nn::CrossEntropyLoss(nn::CrossEntropyLossOptions().label_smoothing(2.0)),
                    Contains("label_smoothing must be in [0, 1]"));
  CHECK_THROWS_WITH(nn::BatchNorm1d(0), Contains("BatchNorm1d: num_features must be positive"));
}

TEST_CASE("nn modules reject bad inputs naming what they expected", "[nn]") {
  manual_seed(18);
  nn::Conv2d conv(1, 32, 3);
  CHECK_THROWS_WITH(
      conv(randn({8, 3, 28, 28})),
      Contains("Conv2d: expected an input with 1 channel(s) (in_channels), got 3 channel(s)") &&
          Contains("[8, 3, 28, 28]"));
  CHECK_THROWS_WITH(
      conv(randn({28, 28})),
      Contains("Conv2d: expected a 3-d (unbatched) or 4-d (batched) input, got shape [28, 28]"));
  CHECK_THROWS_WITH(nn::Conv1d(4, 30, 4)(randn({2, 1600, 4})),
                    Contains("expected an input with 4 channel(s)"));
  CHECK_THROWS_WITH(nn::Linear(1600, 128)(randn({8, 1000})),
                    Contains("Linear: expected an input whose last dimension is in_features=1600, "
                             "got shape [8, 1000]"));
  CHECK_THROWS_WITH(nn::BatchNorm2d(4)(randn({2, 4, 5})),
                    Contains("BatchNorm2d: expected a 4-d input"));
  CHECK_THROWS_WITH(nn::BatchNorm1d(4320)(randn({2, 4000})),
                    Contains("expected an input with 4320 channel(s) (num_features)"));
  CHECK_THROWS_WITH(nn::LayerNorm(768)(randn({2, 512})),
                    Contains("trailing dimensions are normalized_shape=[768]"));
  CHECK_THROWS_WITH(nn::GroupNorm(2, 4)(randn({2, 6, 3})), Contains("with C=4 (num_channels)"));
  CHECK_THROWS_WITH(nn::MaxPool2d(2)(randn({4, 4})),
                    Contains("MaxPool2d: expected a 3-d (unbatched) or 4-d (batched) input"));
  nn::Embedding emb(10, 3);
  CHECK_THROWS_WITH(emb(from_vector<int64_t>({3, 10}, {2})),
                    Contains("Embedding: index 10 is out of range for num_embeddings=10"));
  CHECK_THROWS_WITH(emb(randn({2})), Contains("Embedding: expected integer indices"));
  CHECK_THROWS_WITH(nn::CrossEntropyLoss()(randn({4})), Contains("no single-tensor forward"));
  CHECK_THROWS_WITH(nn::Linear{nullptr}(randn({2})), Contains("empty module holder"));
}

TEST_CASE("nn reprs format floats and tuples as Python does", "[nn]") {
  using nn::repr::py_float;
  CHECK(py_float(1e-5) == "1e-05");
  CHECK(py_float(1.5e-7) == "1.5e-07");
  CHECK(py_float(1e-4) == "0.0001");
  CHECK(py_float(0.001) == "0.001");
  CHECK(py_float(0.1) == "0.1");
  CHECK(py_float(0.05) == "0.05");
  CHECK(py_float(1.0) == "1.0");
  CHECK(py_float(0.0) == "0.0");
  CHECK(py_float(-0.5) == "-0.5");
  CHECK(py_float(100.0) == "100.0");
  CHECK(py_float(123.25) == "123.25");
  CHECK(py_float(1e16) == "1e+16");
  CHECK(py_float(1.25e100) == "1.25e+100");
  CHECK(nn::repr::py_tuple({4}) == "(4,)");
  CHECK(nn::repr::py_tuple({3, 3}) == "(3, 3)");
  CHECK(nn::repr::py_arg(nn::ExpandingArray<2>(2)) == "2");
  CHECK(nn::repr::py_arg(nn::ExpandingArray<2>({2, 3})) == "(2, 3)");
}
