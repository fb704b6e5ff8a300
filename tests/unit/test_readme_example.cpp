// The README's "Ten lines of the API", compiled and run as written, so the README stays true.
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

TEST_CASE("the README example builds and trains", "[readme]") {
  using namespace ipuml;
  // --- README begins ---
  auto model = nn::Sequential(nn::Linear(nn::LinearOptions(784, 128)), nn::ReLU(),
                              nn::Linear(nn::LinearOptions(128, 10)));
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05));
  Tensor x = randn({64, 784}), y = randint(0, 10, {64});
  Tensor loss = cross_entropy(model(x), y);  // eager, on the CPU
  loss.backward();
  sgd.step();
  auto ipu =
      trainingModel(model.ptr(), Options().deviceIterations(4).replicationFactor(2), sgd,
                    [](const Tensor& out, const Tensor& t) { return cross_entropy(out, t); });
  Tensor last = ipu(randn({512, 784}), randint(0, 10, {512}));  // traced once, compiled, run
  // --- README ends ---
  CHECK(ipu.micro_batch() == 64);
  CHECK(last.shape() == Shape{2});  // Final: the last iteration's loss on each replica
  CHECK(std::isfinite(last.to_vector<float>()[0]));
}
