// The CS-2 zoo's new models (GPT-J, UNet 2-D) and SambaNova's starters (LeNet, FFNLogReg,
// LogReg) train alike eagerly and compiled for the CPU, the emulated IPU, the emulated CS-2
// (both execution modes) and the emulated SambaNova RDU (its tiny target): the same losses step
// by step and the same weights after, as a user moving a model between the testbed's machines
// expects.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ipuml/datasets/generated_masks.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/ffn_mnist.hpp>
#include <ipuml/models/gptj.hpp>
#include <ipuml/models/lenet.hpp>
#include <ipuml/models/logistic_regression.hpp>
#include <ipuml/models/unet.hpp>

using namespace ipuml;

namespace {

Options backend_options(const std::string& name) {
  Options o;
  o.showCompilationProgressBar(false);
  if (name == "cerebras-ws") {
    o.backend("cerebras");
    o.backendOption("cerebras", "execution_strategy", "weight_streaming");
  } else if (name == "sambanova") {
    o.backend("sambanova");
    o.backendOption("sambanova", "target", "tiny");
  } else {
    o.backend(name);
  }
  return o;
}

// Losses of `steps` SGD steps of a freshly seeded model, eagerly ("eager") or compiled for a
// backend, and its weights after.
template <typename Make, typename Loss>
std::pair<std::vector<float>, std::vector<std::vector<float>>> train(const std::string& where,
                                                                     Make make, Loss loss,
                                                                     const Tensor& x,
                                                                     const Tensor& y, int steps) {
  manual_seed(11);
  auto model = make();
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  std::vector<float> losses;
  if (where == "eager") {
    for (int i = 0; i < steps; ++i) {
      sgd.zero_grad();
      Tensor l = loss(model->forward(x), y);
      l.backward();
      sgd.step();
      losses.push_back(l.item<float>());
    }
  } else {
    auto tm = trainingModel(model.ptr(), backend_options(where), sgd,
                            [&](const Tensor& out, const Tensor& t) { return loss(out, t); });
    for (int i = 0; i < steps; ++i) losses.push_back(tm(x, y).template item<float>());
  }
  std::vector<std::vector<float>> weights;
  for (auto& p : model->parameters()) weights.push_back(p.template to_vector<float>());
  return {losses, weights};
}

template <typename Make, typename Loss>
void same_everywhere(Make make, Loss loss, const Tensor& x, const Tensor& y) {
  const auto ref = train("eager", make, loss, x, y, 3);
  CHECK(ref.first.back() < ref.first.front());  // it learns
  for (const std::string where : {"cpu", "ipu", "cerebras", "cerebras-ws", "sambanova"}) {
    INFO(where);
    const auto got = train(where, make, loss, x, y, 3);
    for (size_t i = 0; i < ref.first.size(); ++i)
      CHECK(got.first[i] == Approx(ref.first[i]).epsilon(1e-4));
    for (size_t k = 0; k < ref.second.size(); ++k)
      for (size_t i = 0; i < ref.second[k].size(); ++i)
        CHECK(got.second[k][i] == Approx(ref.second[k][i]).margin(1e-4));
  }
}

}  // namespace

TEST_CASE("zoo on every backend: GPT-J trains alike eagerly and on cpu ipu the CS-2 and the RDU",
          "[gptj][cerebras][ipu][sambanova]") {
  Generator gen(3);
  const Tensor ids = randint(0, 64, {4, 16}, &gen);
  same_everywhere([] { return models::GPTJForCausalLM(models::GPTJConfig::tiny()); },
                  [](const Tensor& logits, const Tensor& labels) {
                    return models::shifted_causal_lm_loss(logits, labels);
                  },
                  ids, ids);
}

TEST_CASE("zoo on every backend: UNet trains alike eagerly and on cpu ipu the CS-2 and the RDU",
          "[unet][cerebras][ipu][sambanova]") {
  datasets::GeneratedMasksOptions o;
  o.size = 8;
  o.height = o.width = 16;
  o.seed = 5;
  const datasets::GeneratedMasks set(o);
  const std::vector<int64_t> idx{0, 1, 2, 3, 4, 5, 6, 7};
  const auto batch = set.get_batch(idx);
  const models::UNetConfig c = models::UNetConfig::tiny();
  same_everywhere([c] { return models::UNet(c); },
                  [](const Tensor& logits, const Tensor& mask) {
                    return models::binary_cross_entropy_with_logits(logits, mask);
                  },
                  batch.data, batch.target);
}

TEST_CASE(
    "zoo on every backend: SambaNova's starters train alike eagerly and on cpu ipu the CS-2 "
    "and the RDU",
    "[sambanova][cerebras][ipu]") {
  Generator gen(4);
  const Tensor images = uniform({8, 1, 28, 28}, 0.0, 1.0, &gen);
  const Tensor flat = reshape(images, {8, 784});
  const Tensor labels = randint(0, 10, {8}, &gen);
  SECTION("LeNet") {
    same_everywhere([] { return models::LeNet(); }, models::lenet_loss, images, labels);
  }
  SECTION("FFNLogReg") {
    same_everywhere([] { return models::FFNLogReg(); }, models::ffn_mnist_loss, flat, labels);
  }
  SECTION("LogReg") {
    same_everywhere([] { return models::LogReg(models::LogRegConfig().bias(true)); },
                    models::logreg_loss, flat, labels);
  }
}
