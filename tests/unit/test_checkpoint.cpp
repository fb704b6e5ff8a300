// Tests of HDF5 checkpoints: round trip (every dtype, groups per module path), validation of
// bad files, a save failing midway leaves the old file, and bit-exact resumption with SGD.
#include <ipuml/io/checkpoint.hpp>

#if IPUML_WITH_HDF5

#include <ipuml/io/hdf5.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/optim/sgd.hpp>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "../support/same_bits.hpp"
#include "../support/error_of.hpp"
#include "../support/temp_dir.hpp"

#include <atomic>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace ipuml;

namespace {

struct TempDir : ipuml::testing::TempDir {
  TempDir() : ipuml::testing::TempDir("ipuml_test_ckpt") {}
};

// y = w2 relu(w1 x + b1): parameters two levels deep, plus buffers of other dtypes.
struct HeadImpl : nn::Module {
  Tensor w2;
  explicit HeadImpl(uint64_t seed) : nn::Module("Head") {
    Generator g(seed);
    w2 = register_parameter("weight", randn({2, 4}, &g) * 0.5);
  }
};
struct NetImpl : nn::Module {
  Tensor w1, b1, count, half;
  std::shared_ptr<nn::Module> inner;
  std::shared_ptr<HeadImpl> head;
  explicit NetImpl(uint64_t seed) : nn::Module("Net") {
    Generator g(seed);
    w1 = register_parameter("w1", randn({4, 3}, &g) * 0.5);
    b1 = register_parameter("b1", randn({4}, &g) * 0.1);
    count = register_buffer("count", full({}, double(seed), kInt64));
    half = register_buffer("half", from_vector(std::vector<float>{1.5f, -2.0f}, {2}, kFloat16));
    inner = register_module("layer1", std::make_shared<nn::Module>("Wrapper"));
    head = inner->register_module("head", std::make_shared<HeadImpl>(seed + 1));
  }
  Tensor forward(const Tensor& x) override {
    return matmul(relu(matmul(x, w1.t()) + b1), head->w2.t());
  }
};

template <typename T>
std::vector<T> values(const Tensor& t) {
  auto c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

using ipuml::testing::same_bits;

using ipuml::testing::error_of;

}  // namespace

TEST_CASE("checkpoint round trip: groups per module path, dtypes, step, optimizer state",
          "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("a.h5");
  NetImpl net(1);
  nn::StateDict opt{{"state.0.momentum_buffer", randn({4, 3})},
                    {"group.0.lr", scalar_tensor(0.05)}};
  io::save_checkpoint(path, net, opt, 1234);

  {
    io::H5File f(path);
    CHECK(f.is_dataset("model/w1"));
    CHECK(f.is_dataset("model/layer1/head/weight"));  // "layer1.head.weight"
    CHECK(f.is_group("model/layer1/head"));
    CHECK(f.is_dataset("optimizer/state/0/momentum_buffer"));
    CHECK(f.attr_int("/", "step") == 1234);
    CHECK(f.attr_string("model/half", "dtype") == "float16");
    CHECK(f.info("model/count").dtype == io::H5Dtype::int64);
  }

  NetImpl other(99);
  REQUIRE_FALSE(same_bits(other.state_dict(), net.state_dict()));
  const Tensor w1_before = other.w1;
  nn::StateDict opt_back;
  CHECK(io::load_checkpoint(path, other, &opt_back) == 1234);
  CHECK(same_bits(other.state_dict(), net.state_dict()));
  CHECK(other.w1.same(w1_before));  // updated in place
  CHECK(other.w1.requires_grad());
  CHECK(same_bits(opt_back, opt));  // same keys, in the saved order

  auto ck = io::read_checkpoint(path);
  CHECK(ck.step == 1234);
  CHECK(ck.model.size() == 5);
  CHECK(ck.model[0].first == "w1");

  // Saving again replaces the file.
  io::save_checkpoint(path, other, {}, 7);
  CHECK(io::load_checkpoint(path, net) == 7);
}

TEST_CASE("checkpoint load validates the file and names file and key", "[checkpoint]") {
  TempDir dir;
  NetImpl net(1);
  const std::string good = dir.file("good.h5");
  io::save_checkpoint(good, net, {}, 3);
  // Files edited below lose their integrity record's match: they are read as foreign files,
  // which still get every key, shape and dtype check.
  io::CheckpointReadOptions unverified;
  unverified.allow_unverified = true;

  auto msg = error_of([&] { io::load_checkpoint(dir.file("missing.h5"), net); });
  CHECK_THAT(msg, Catch::Contains("missing.h5") && Catch::Contains("no such file"));

  const std::string junk = dir.file("junk.h5");
  std::ofstream(junk) << "definitely not HDF5";
  CHECK_THAT(error_of([&] { io::load_checkpoint(junk, net); }),
             Catch::Contains("junk.h5") && Catch::Contains("not"));

  // A truncated copy of a real checkpoint.
  const std::string cut = dir.file("cut.h5");
  fs::copy_file(good, cut);
  fs::resize_file(cut, fs::file_size(good) / 2);
  CHECK_THAT(error_of([&] { io::load_checkpoint(cut, net); }), Catch::Contains("cut.h5"));

  // HDF5, but not a checkpoint: refused for want of an integrity record, and when unverified
  // files are allowed, for want of the marker.
  const std::string plain = dir.file("plain.h5");
  {
    io::H5File f(plain, io::H5File::Mode::truncate);
    f.write<float>("x", {2}, std::vector<float>{1, 2});
  }
  CHECK_THAT(error_of([&] { io::load_checkpoint(plain, net); }),
             Catch::Contains("no ipuml integrity record"));
  CHECK_THAT(error_of([&] { io::load_checkpoint(plain, net, nullptr, nullptr, unverified); }),
             Catch::Contains("not an ipuml checkpoint"));

  auto edited = [&](const std::string& name, const std::function<void(io::H5File&)>& edit) {
    const std::string p = dir.file(name);
    fs::copy_file(good, p);
    io::H5File f(p, io::H5File::Mode::read_write);
    edit(f);
    return p;
  };
  NetImpl target(5);
  const auto before = target.state_dict();
  auto snapshot = [&] {
    nn::StateDict s;
    for (auto& [k, t] : before) s.emplace_back(k, t.clone());
    return s;
  }();

  const auto no_key =
      edited("nokey.h5", [](io::H5File& f) { f.remove("model/layer1/head/weight"); });
  CHECK_THAT(error_of([&] { io::load_checkpoint(no_key, target); }),
             Catch::Contains("nokey.h5") && Catch::Contains("integrity record"));
  CHECK_THAT(error_of([&] { io::load_checkpoint(no_key, target, nullptr, nullptr, unverified); }),
             Catch::Contains("nokey.h5") && Catch::Contains("missing 'layer1.head.weight'"));

  const auto extra = edited("extra.h5", [](io::H5File& f) {
    f.write<float>("model/layer1/bias", {4}, std::vector<float>(4, 0.0f));
    f.set_attr("model/layer1/bias", "dtype", "float32");
  });
  CHECK_THAT(error_of([&] { io::load_checkpoint(extra, target, nullptr, nullptr, unverified); }),
             Catch::Contains("extra.h5") && Catch::Contains("unexpected 'layer1.bias'"));

  const auto shape = edited("shape.h5", [](io::H5File& f) {
    f.write<float>("model/b1", {5}, std::vector<float>(5, 0.0f));
    f.set_attr("model/b1", "dtype", "float32");
  });
  CHECK_THAT(error_of([&] { io::load_checkpoint(shape, target, nullptr, nullptr, unverified); }),
             Catch::Contains("shape.h5") && Catch::Contains("'b1' has shape [5]"));

  const auto dtype = edited("dtype.h5", [](io::H5File& f) {
    f.write<int32_t>("model/b1", {4}, std::vector<int32_t>(4, 0));
    f.set_attr("model/b1", "dtype", "int32");
  });
  CHECK_THAT(error_of([&] { io::load_checkpoint(dtype, target, nullptr, nullptr, unverified); }),
             Catch::Contains("dtype.h5") && Catch::Contains("'b1' is int32"));

  // Nothing above changed the module.
  CHECK(same_bits(target.state_dict(), snapshot));
}

TEST_CASE("checkpoint: the optimizer record is written, read back and checked",
          "[checkpoint][errors]") {
  TempDir dir;
  NetImpl net(1);
  const std::string with = dir.file("with.h5");
  io::save_checkpoint(with, net, {}, 0, {}, io::OptimizerRecord{"AdamW", {3, 1}});
  const io::Checkpoint c = io::read_checkpoint(with);
  CHECK(c.optimizer_record.type == "AdamW");
  CHECK(c.optimizer_record.group_sizes == std::vector<int64_t>{3, 1});
  // Files written without one (every checkpoint before it) read with an empty record.
  const std::string without = dir.file("without.h5");
  io::save_checkpoint(without, net);
  CHECK(io::read_checkpoint(without).optimizer_record.type.empty());
  CHECK_THAT(error_of([&] {
               io::save_checkpoint(dir.file("bad.h5"), net, {}, 0, {},
                                   io::OptimizerRecord{"no spaces", {1}});
             }),
             Catch::Contains("optimizer type 'no spaces' cannot be stored"));
  CHECK_FALSE(fs::exists(dir.file("bad.h5")));

  // Edited files (read as foreign ones) with a record that is not one.
  io::CheckpointReadOptions unverified;
  unverified.allow_unverified = true;
  auto edited = [&](const std::string& name, const std::function<void(io::H5File&)>& edit) {
    const std::string p = dir.file(name);
    fs::copy_file(without, p);
    io::H5File f(p, io::H5File::Mode::read_write);
    edit(f);
    return p;
  };
  const auto odd_type = edited("odd_type.h5", [](io::H5File& f) {
    f.set_attr("optimizer", "type", "../../x");
    f.set_attr("optimizer", "group_sizes", std::vector<int64_t>{1});
  });
  CHECK_THAT(error_of([&] { io::read_checkpoint(odd_type, unverified); }),
             Catch::Contains("odd_type.h5") &&
                 Catch::Contains("the optimizer type attribute is not an optimizer's name"));
  const auto no_sizes =
      edited("no_sizes.h5", [](io::H5File& f) { f.set_attr("optimizer", "type", "SGD"); });
  CHECK_THAT(error_of([&] { io::read_checkpoint(no_sizes, unverified); }),
             Catch::Contains("has a type but no group_sizes"));
  const auto negative = edited("negative.h5", [](io::H5File& f) {
    f.set_attr("optimizer", "type", "SGD");
    f.set_attr("optimizer", "group_sizes", std::vector<int64_t>{2, -1});
  });
  CHECK_THAT(error_of([&] { io::read_checkpoint(negative, unverified); }),
             Catch::Contains("an optimizer parameter group of -1 parameters"));
}

TEST_CASE("checkpoint: a save that throws midway leaves the old checkpoint loadable",
          "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ck.h5");
  NetImpl net(1);
  io::save_checkpoint(path, net, {}, 10);

  NetImpl changed(2);
  // The model is written, then the second optimizer entry collides with the first mid-save.
  nn::StateDict bad{{"state.0.buf", zeros({3})}, {"state.0.buf", zeros({3})}};
  CHECK_THAT(error_of([&] { io::save_checkpoint(path, changed, bad, 20); }),
             Catch::Contains("collides"));
  nn::StateDict nested{{"state.0", zeros({3})}, {"state.0.buf", zeros({3})}};
  CHECK_THAT(error_of([&] { io::save_checkpoint(path, changed, nested, 20); }),
             Catch::Contains("lies under"));

  NetImpl back(3);
  CHECK(io::load_checkpoint(path, back) == 10);
  CHECK(same_bits(back.state_dict(), net.state_dict()));
  // No temporary files left behind.
  int files = 0;
  for (auto& e : fs::directory_iterator(dir.path)) files += e.is_regular_file();
  CHECK(files == 1);
}

TEST_CASE("checkpoint: resuming SGD with momentum is bit-identical to an uninterrupted run",
          "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("resume.h5");
  Generator g(123);
  const Tensor x = randn({16, 3}, &g);
  const Tensor y = randn({16, 2}, &g);
  const int total = 12;

  auto train = [&](NetImpl& net, optim::SGD& opt, int from, int to) {
    for (int s = from; s < to; ++s) {
      opt.zero_grad();
      Tensor loss = mse_loss(net.forward(x), y);
      loss.backward();
      opt.step();
    }
  };
  auto make_opt = [](NetImpl& net) {
    return optim::SGD(net.parameters(),
                      optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(1e-3));
  };

  NetImpl ref(1);
  auto ref_opt = make_opt(ref);
  train(ref, ref_opt, 0, total);

  NetImpl first(1);
  auto first_opt = make_opt(first);
  train(first, first_opt, 0, total / 2);
  io::save_checkpoint(path, first, first_opt.state_dict(), total / 2);

  NetImpl resumed(77);  // fresh objects, different initial weights
  auto resumed_opt = make_opt(resumed);
  nn::StateDict opt_state;
  const int64_t step = io::load_checkpoint(path, resumed, &opt_state);
  resumed_opt.load_state_dict(opt_state);
  CHECK(step == total / 2);
  train(resumed, resumed_opt, static_cast<int>(step), total);

  CHECK(same_bits(resumed.state_dict(), ref.state_dict()));
  CHECK(same_bits(resumed_opt.state_dict(), ref_opt.state_dict()));
  CHECK_FALSE(same_bits(first.state_dict(), ref.state_dict()));  // the check can fail
}

#endif  // IPUML_WITH_HDF5
