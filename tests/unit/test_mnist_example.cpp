// Smoke tests of the MNIST example: the tutorial's network (shapes, parameter count, repr),
// a few SGD steps on synthetic digits lowering the loss, and the ipuml-mnist program end to end
// on a tiny generated IDX data set (training, checkpoint, resume, the accuracy line).
#include <ipuml/data/data.hpp>
#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/mnist_cnn.hpp>
#include <ipuml/optim/sgd.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../support/same_bits.hpp"
#include "../support/run_command.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <regex>
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
  return ipuml::testing::run_command(cmd, status);
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

#if IPUML_WITH_HDF5
namespace {

using ipuml::testing::same_bits;

std::string line_with(const std::string& out, const std::string& prefix) {
  const auto at = out.find(prefix);
  return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
}

}  // namespace

TEST_CASE("mnist example: resume is bit-identical and every test sample is evaluated",
          "[mnist_example][hostile]") {
  const fs::path exe = fs::path(IPUML_BINARY_DIR) / "examples" / "mnist" / "ipuml-mnist";
  if (!fs::exists(exe)) {
    WARN("ipuml-mnist not built, skipping (" << exe << ")");
    return;
  }
  const fs::path dir =
      fs::temp_directory_path() / ("ipuml_test_mnist_resume_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_idx(dir / "train-images-idx3-ubyte", dir / "train-labels-idx1-ubyte",
            synthetic_digits(240, 5));
  write_idx(dir / "t10k-images-idx3-ubyte", dir / "t10k-labels-idx1-ubyte",
            synthetic_digits(100, 6));
  auto test_set = datasets::normalized_mnist(dir.string(), false);
  data::DataLoader all(test_set, data::DataLoaderOptions().batch_size(100));
  const auto everything = *all.begin();

  for (const std::string device : {"eager", "cpu", "ipu"}) {
    INFO("device " << device);
    const std::string base = exe.string() + " --data-dir " + dir.string() +
                             " --batch-size 8 --device-iterations 5 --threads 2 --no-profile "
                             "--lr 0.1 --max-batches 3 --device " +
                             device + " --checkpoint ";
    const std::string a = (dir / (device + "_a.h5")).string(),
                      b = (dir / (device + "_b.h5")).string();
    int status = 0;
    std::string out = run(base + a + " --epochs 2", &status);
    REQUIRE(status == 0);
    out = run(base + b + " --epochs 1", &status);
    REQUIRE(status == 0);
    out = run(base + b + " --epochs 2", &status);
    REQUIRE(status == 0);
    REQUIRE_THAT(out, Catch::Contains("Resumed from " + b + " after epoch 1"));
    // Interrupted after epoch 1 and resumed: the same bits as the uninterrupted run (dropout
    // included: the compiled model's run counter is in the checkpoint).
    const auto ca = io::read_checkpoint(a), cb = io::read_checkpoint(b);
    CHECK(ca.step == 2);
    CHECK(same_bits(ca.model, cb.model));
    CHECK(same_bits(ca.optimizer, cb.optimizer));
    CHECK(same_bits(ca.training, cb.training));

    // Evaluation only (nothing left to train): every one of the 100 test samples, whether the
    // batch is larger than the set (10001) or leaves a short last batch (30), and the accuracy
    // the trained weights give when computed here.
    models::MnistCnn net;
    io::load_checkpoint(a, *net);
    net->eval();
    NoGradGuard ng;
    const Tensor pred = argmax(net(everything.data), 1);
    const int64_t correct = sum(eq(pred, everything.target).to(kInt64)).item<int64_t>();
    char want[64];
    std::snprintf(want, sizeof want, "Accuracy on test set: %.2f%%", double(correct));
    for (const char* tbs : {"10001", "30", "100"}) {
      INFO("test batch size " << tbs);
      const std::string eval = exe.string() + " --data-dir " + dir.string() +
                               " --batch-size 8 --device-iterations 5 --threads 2 --no-profile "
                               "--device " +
                               device + " --epochs 2 --test-batch-size " + tbs + " --checkpoint " +
                               a;
      out = run(eval, &status);
      INFO(out);
      CHECK(status == 0);
      CHECK(line_with(out, "Evaluated ") == "Evaluated 100 test samples");
      CHECK(line_with(out, "Accuracy on test set: ") == want);
    }
  }
  // Flags that do not match the saved run are refused instead of silently diverging.
  int status = 0;
  const std::string out =
      run(exe.string() + " --data-dir " + dir.string() +
              " --batch-size 4 --device cpu --epochs 3 --checkpoint " + (dir / "cpu_a.h5").string(),
          &status);
  CHECK(status != 0);
  CHECK_THAT(out, Catch::Contains("was saved with batch_size 8 but this run has 4"));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST_CASE("mnist example: bad flags and paths get one clear line before any work",
          "[mnist_example][hostile]") {
  const fs::path exe = fs::path(IPUML_BINARY_DIR) / "examples" / "mnist" / "ipuml-mnist";
  if (!fs::exists(exe)) {
    WARN("ipuml-mnist not built, skipping (" << exe << ")");
    return;
  }
  const fs::path dir =
      fs::temp_directory_path() / ("ipuml_test_mnist_flags_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "data");
  write_idx(dir / "data" / "train-images-idx3-ubyte", dir / "data" / "train-labels-idx1-ubyte",
            synthetic_digits(40, 5));
  write_idx(dir / "data" / "t10k-images-idx3-ubyte", dir / "data" / "t10k-labels-idx1-ubyte",
            synthetic_digits(20, 6));
  const std::string base = exe.string() + " --data-dir " + (dir / "data").string() + " ";
  const std::string fifo = (dir / "pipe").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directories(dir / "baddata" / "train-images-idx3-ubyte");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--batch-size 4611686018427387904", "--batch-size 4611686018427387904 is outside [1, 2^31]"},
      {"--batch-size 65536 --device-iterations 65536", "is more than 2^31 samples per host batch"},
      {"--lr nan", "--lr"},
      {"--set clock_hz=1e-300", "clock_hz must be in [1000, "},
      {"--target ipu9", "unknown IPU target 'ipu9'"},
      {"--checkpoint " + (dir / "missing" / "ck.h5").string(), "does not exist"},
      {"--checkpoint " + dir.string(), "is a directory, expected a regular file"},
      {"--checkpoint " + fifo, "is a FIFO (named pipe)"},
      {"--ipus 2 --pipelined", "--pipelined needs --ipus >= 2 and --gradient-accumulation >= 3"},
      {"--ipus 5", "--ipus: must be an integer from 1 to 4, got '5'"},
  };
  for (const auto& [flags, message] : cases) {
    INFO(flags);
    int status = 0;
    const std::string out = run(base + flags + " --epochs 1", &status);
    CHECK(status == 2);  // a usage error
    CHECK_THAT(out, Catch::Contains(message));
    CHECK_THAT(out, !Catch::Contains("Epoch 1"));  // reported before any training
  }
  int status = 0;
  std::string out = run(exe.string() + " --data-dir " + (dir / "baddata").string(), &status);
  CHECK(status != 0);
  CHECK_THAT(out, Catch::Contains("is a directory, expected the IDX file"));
  // Pipelined over 2 IPUs: trains, then prints the three strategies side by side.
  out = run(base +
                "--ipus 2 --pipelined --gradient-accumulation 3 --device-iterations 1 "
                "--batch-size 2 --test-batch-size 10 --epochs 1 --no-profile",
            &status);
  CHECK(status == 0);
  for (const char* line : {"Model parallelism (simulated", "single IPU   1 IPU ",
                           "sharded      2 IPUs", "pipelined    2 IPUs"})
    CHECK_THAT(out, Catch::Contains(line));
  std::error_code ec;
  fs::remove_all(dir, ec);
}
#endif  // IPUML_WITH_HDF5
