// Smoke tests of the MNIST example: the tutorial's network (shapes, parameter count, repr),
// a few SGD steps on synthetic digits lowering the loss, and the ipuml-mnist program end to end
// on a tiny generated IDX data set (training, checkpoint, resume, the accuracy line).
#include <ipuml/data/data.hpp>
#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/mnist_cnn.hpp>
#include <ipuml/optim/sgd.hpp>

#include <unistd.h>

#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace ipuml;

namespace {

// Digit c is a bright 6x6 square at a class-specific place plus noise: learnable in a few steps.
datasets::MnistSplit synthetic_digits(int64_t count, uint64_t seed) {
  datasets::MnistSplit s;
  s.count = count;
  s.rows = s.cols = 28;
  s.images.resize(static_cast<size_t>(count * 784));
  s.labels.resize(static_cast<size_t>(count));
  const RandomStream rs{seed, 0};
  for (int64_t i = 0; i < count; ++i) {
    const int c = static_cast<int>(i % 10);
    s.labels[static_cast<size_t>(i)] = static_cast<uint8_t>(c);
    const int r0 = 2 + (c / 5) * 12, c0 = 2 + (c % 5) * 5;
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        const bool on = y >= r0 && y < r0 + 6 && x >= c0 && x < c0 + 6;
        const int noise =
            static_cast<int>(rs.uniform(static_cast<uint64_t>(i * 784 + y * 28 + x)) * 60);
        s.images[static_cast<size_t>(i * 784 + y * 28 + x)] =
            static_cast<uint8_t>(on ? 255 - noise : noise);
      }
  }
  return s;
}

void write_idx(const fs::path& images, const fs::path& labels, const datasets::MnistSplit& s) {
  auto be32 = [](std::ofstream& f, uint32_t v) {
    const std::array<char, 4> b{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                                static_cast<char>(v >> 8), static_cast<char>(v)};
    f.write(b.data(), 4);
  };
  std::ofstream fi(images, std::ios::binary), fl(labels, std::ios::binary);
  be32(fi, 2051);
  be32(fi, static_cast<uint32_t>(s.count));
  be32(fi, 28);
  be32(fi, 28);
  fi.write(reinterpret_cast<const char*>(s.images.data()),
           static_cast<std::streamsize>(s.images.size()));
  be32(fl, 2049);
  be32(fl, static_cast<uint32_t>(s.count));
  fl.write(reinterpret_cast<const char*>(s.labels.data()),
           static_cast<std::streamsize>(s.labels.size()));
}

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

}  // namespace

TEST_CASE("mnist example: the tutorial's network", "[mnist_example]") {
  manual_seed(0);
  models::MnistCnn net;
  int64_t params = 0;
  for (auto& p : net->parameters()) params += p.numel();
  CHECK(params == 225034);  // 320 + 18496 + 204928 + 1290, as PyTorch counts it
  const auto keys = net->state_dict();
  CHECK(keys.front().first == "layer1.conv.weight");
  CHECK(keys.back().first == "layer4.bias");

  net->eval();
  Tensor x = randn({3, 1, 28, 28});
  Tensor p = net(x);
  CHECK(p.shape() == Shape{3, 10});
  for (float s : sum(p, {1}).to_vector<float>()) CHECK(s == Approx(1.0f).epsilon(1e-5));

  models::MnistCnnWithLoss wrapped(net);
  const std::string repr = wrapped->to_string();
  CHECK_THAT(
      repr, Catch::StartsWith("TrainingModelWithLoss(\n  (model): Network(\n    (layer1): Block("));
  CHECK_THAT(repr, Catch::Contains("(softmax): Softmax(dim=1)"));
}

TEST_CASE("mnist example: a few SGD steps on synthetic digits lower the loss", "[mnist_example]") {
  for (bool double_softmax : {true, false}) {
    INFO("double softmax " << double_softmax);
    manual_seed(1);
    models::MnistCnn net;
    models::MnistCnnWithLoss model(net, double_softmax);
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.05));
    auto ds = datasets::MnistDataset(synthetic_digits(160, 3))
                  .map(data::transforms::Normalize(datasets::kMnistMean, datasets::kMnistStd));
    data::DataLoader loader(ds, data::DataLoaderOptions().batch_size(8).shuffle(true).seed(2));
    std::vector<float> losses;
    // The softmax-twice loss sits on a plateau near ln(10) for ~100 steps before it drops
    // (its gradients are small), so it gets more steps than the textbook loss.
    const int epochs = double_softmax ? 10 : 3;
    for (int epoch = 0; epoch < epochs; ++epoch)
      for (auto& batch : loader) {
        opt.zero_grad();
        auto [out, loss] = model(batch.data, batch.target);
        loss.backward();
        opt.step();
        losses.push_back(loss.item<float>());
      }
    REQUIRE(losses.size() == static_cast<size_t>(20 * epochs));
    float first = 0, last = 0;
    for (int i = 0; i < 10; ++i) {
      first += losses[static_cast<size_t>(i)];
      last += losses[losses.size() - 1 - static_cast<size_t>(i)];
    }
    CHECK(last < 0.85f * first);
  }
}

TEST_CASE("mnist example: ipuml-mnist trains, checkpoints, resumes and reports accuracy",
          "[mnist_example]") {
  const fs::path exe = fs::path(IPUML_BINARY_DIR) / "examples" / "mnist" / "ipuml-mnist";
  if (!fs::exists(exe)) {
    WARN("ipuml-mnist not built, skipping (" << exe << ")");
    return;
  }
  static std::atomic<int> counter{0};
  const fs::path dir =
      fs::temp_directory_path() /
      ("ipuml_test_mnist_ex_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_idx(dir / "train-images-idx3-ubyte", dir / "train-labels-idx1-ubyte",
            synthetic_digits(400, 5));
  write_idx(dir / "t10k-images-idx3-ubyte", dir / "t10k-labels-idx1-ubyte",
            synthetic_digits(100, 6));
  const std::string ck = (dir / "ck.h5").string();
  const std::string base =
      exe.string() + " --data-dir " + dir.string() +
      " --batch-size 8 --device-iterations 5 --test-batch-size 20 --threads 2 --checkpoint " + ck;

  int status = 0;
  std::string out = run(base + " --epochs 2", &status);
  INFO(out);
  CHECK(status == 0);
  CHECK_THAT(out, Catch::Contains("Network(") && Catch::Contains("Epoch 1/2: loss") &&
                      Catch::Contains("Epoch 2/2: loss") &&
                      Catch::Contains("Accuracy on test set: ") && Catch::Contains("Wall time: "));
  CHECK(fs::exists(ck));

  out = run(base + " --epochs 3", &status);
  CHECK(status == 0);
  CHECK_THAT(out, Catch::Contains("Resumed from " + ck + " after epoch 2") &&
                      Catch::Contains("Epoch 3/3") && !Catch::Contains("Epoch 1/3"));

  out = run(exe.string() + " --batch-size 0", &status);
  CHECK(status != 0);
  out = run(exe.string() + " --data-dir " + (dir / "nowhere").string(), &status);
  CHECK(status != 0);
  CHECK_THAT(out, Catch::Contains("fetch-data"));
  std::error_code ec;
  fs::remove_all(dir, ec);
}
