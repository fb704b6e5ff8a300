// Tests of the vision data path: the image augmentations (bilinear resized crop against a
// double-precision formula, RandomResizedCrop's boxes, flips, channel repeat) and their errors,
// per-sample random streams that make augmented batches independent of threads and prefetch,
// GeneratedImages, and the IDX image sets (statistics, errors, Fashion-MNIST when cached).
#include <ipuml/core/parallel.hpp>
#include <ipuml/data/data.hpp>
#include <ipuml/datasets/generated_images.hpp>
#include <ipuml/datasets/image_sets.hpp>
#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/tensor/ops.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "../support/error_of.hpp"

using namespace ipuml;
using namespace ipuml::data;
using namespace ipuml::data::transforms;
using ipuml::testing::error_of;

namespace {

Tensor ramp_image(int64_t c, int64_t h, int64_t w) {
  std::vector<float> v(static_cast<size_t>(c * h * w));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) + 0.01f * i;
  return from_vector<float>(v, {c, h, w});
}

// Bilinear sampling written from the definition in double precision: output pixel centre
// (y + 1/2) maps to source coordinate (y + 1/2) * in/out - 1/2, clamped to [0, in - 1], and the
// value interpolates the two neighbours around it.
double reference_sample(const std::vector<float>& img, int64_t W, const CropBox& b, int64_t out_h,
                        int64_t out_w, int64_t plane, int64_t y, int64_t x, int64_t H) {
  auto coord = [](int64_t d, int64_t in, int64_t out) {
    double s =
        (static_cast<double>(d) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
    return std::clamp(s, 0.0, static_cast<double>(in - 1));
  };
  const double sy = coord(y, b.height, out_h), sx = coord(x, b.width, out_w);
  const auto y0 = static_cast<int64_t>(std::floor(sy)), x0 = static_cast<int64_t>(std::floor(sx));
  const int64_t y1 = std::min(y0 + 1, b.height - 1), x1 = std::min(x0 + 1, b.width - 1);
  const double fy = sy - static_cast<double>(y0), fx = sx - static_cast<double>(x0);
  auto at = [&](int64_t yy, int64_t xx) {
    return static_cast<double>(
        img[static_cast<size_t>(plane * H * W + (b.top + yy) * W + (b.left + xx))]);
  };
  return (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x1)) +
         fy * ((1 - fx) * at(y1, x0) + fx * at(y1, x1));
}

}  // namespace

TEST_CASE("vision data: resized_crop matches bilinear interpolation with half-pixel centres",
          "[data][vision]") {
  const int64_t C = 2, H = 9, W = 13;
  const Tensor img = ramp_image(C, H, W);
  const auto v = img.to_vector<float>();
  const std::vector<std::pair<CropBox, std::pair<int64_t, int64_t>>> cases = {
      {{0, 0, 9, 13}, {9, 13}}, {{0, 0, 9, 13}, {32, 32}}, {{2, 3, 5, 7}, {16, 11}},
      {{1, 4, 8, 9}, {3, 2}},   {{4, 6, 1, 1}, {4, 4}},    {{0, 12, 9, 1}, {5, 6}},
      {{3, 0, 6, 13}, {6, 26}}};
  for (const auto& [box, size] : cases) {
    const auto [oh, ow] = size;
    const Tensor out = resized_crop(img, box, oh, ow);
    REQUIRE(out.shape() == Shape{C, oh, ow});
    const auto o = out.to_vector<float>();
    double worst = 0;
    for (int64_t p = 0; p < C; ++p)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x)
          worst = std::max(worst, std::abs(o[static_cast<size_t>((p * oh + y) * ow + x)] -
                                           reference_sample(v, W, box, oh, ow, p, y, x, H)));
    INFO("box " << box.top << "," << box.left << " " << box.height << "x" << box.width << " -> "
                << oh << "x" << ow);
    CHECK(worst < 1e-5);
  }
  // The whole image at its own size is itself, bit for bit.
  CHECK(resized_crop(img, {0, 0, H, W}, H, W).to_vector<float>() == v);
  // Halving averages 2x2 blocks exactly (source coordinate 2y + 1/2).
  const Tensor four =
      from_vector<float>({1, 3, 5, 7, 9, 11, 13, 15, 2, 4, 6, 8, 10, 12, 14, 16}, {1, 4, 4});
  const auto half = Resize(2, 2)({four, Tensor()}).data.to_vector<float>();
  CHECK(half == std::vector<float>{6, 10, 7, 11});
  // A batch [B, C, H, W] resizes every plane.
  CHECK(Resize(5, 4)({zeros({3, 2, 8, 8}), Tensor()}).data.shape() == Shape{3, 2, 5, 4});
}

TEST_CASE("vision data: RandomResizedCrop boxes lie in the image with the asked area and ratio",
          "[data][vision]") {
  const RandomResizedCrop rrc(32, 32, {0.35, 1.0}, {3.0 / 4.0, 4.0 / 3.0});
  std::set<std::pair<int64_t, int64_t>> corners;
  for (int64_t i = 0; i < 2000; ++i) {
    SampleRandom r(7, 0, i);
    const CropBox b = rrc.params(28, 28, r);
    REQUIRE(b.height >= 1);
    REQUIRE(b.width >= 1);
    REQUIRE(b.top >= 0);
    REQUIRE(b.left >= 0);
    REQUIRE(b.top + b.height <= 28);
    REQUIRE(b.left + b.width <= 28);
    // Rounding each side to an integer moves the area and ratio a little.
    const double area = double(b.height * b.width) / (28.0 * 28.0);
    CHECK(area >= 0.35 * 0.85);
    CHECK(area <= 1.0);
    const double ratio = double(b.width) / double(b.height);
    CHECK(ratio >= 0.75 * 0.85);
    CHECK(ratio <= 4.0 / 3.0 / 0.85);
    corners.insert({b.top, b.left});
  }
  CHECK(corners.size() > 50);  // the boxes move around
  // No box of that area fits a 1x100 image: the centre crop with the ratio clamped (1 x 1).
  const RandomResizedCrop square(4, 4, {0.9, 1.0}, {1.0, 1.0});
  SampleRandom r(1, 0, 0);
  CHECK(square.params(1, 100, r) == CropBox{0, 49, 1, 1});
  // The transform is the resized crop of the box its params draw.
  const Tensor img = ramp_image(1, 28, 28);
  SampleRandom r1(3, 2, 5), r2(3, 2, 5);
  const CropBox b = rrc.params(28, 28, r1);
  CHECK(rrc({img, Tensor()}, r2).data.to_vector<float>() ==
        resized_crop(img, b, 32, 32).to_vector<float>());
}

TEST_CASE("vision data: RandomHorizontalFlip mirrors with probability p, RepeatChannels copies",
          "[data][vision]") {
  const Tensor img = ramp_image(2, 3, 5);
  const auto v = img.to_vector<float>();
  std::vector<float> mirrored(v.size());
  for (int64_t row = 0; row < 6; ++row)
    for (int64_t x = 0; x < 5; ++x)
      mirrored[static_cast<size_t>(row * 5 + x)] = v[static_cast<size_t>(row * 5 + 4 - x)];
  SampleRandom r(1, 0, 0);
  CHECK(RandomHorizontalFlip(1.0)({img, Tensor()}, r).data.to_vector<float>() == mirrored);
  CHECK(RandomHorizontalFlip(0.0)({img, Tensor()}, r).data.to_vector<float>() == v);
  int flipped = 0;
  for (int64_t i = 0; i < 2000; ++i) {
    SampleRandom ri(11, 3, i);
    flipped += RandomHorizontalFlip(0.5)({img, Tensor()}, ri).data.to_vector<float>() == mirrored;
  }
  CHECK(flipped > 880);
  CHECK(flipped < 1120);

  const Tensor grey = ramp_image(1, 4, 3);
  const Tensor rgb = RepeatChannels(3)({grey, Tensor()}).data;
  REQUIRE(rgb.shape() == Shape{3, 4, 3});
  for (int64_t c = 0; c < 3; ++c)
    CHECK(rgb.select(0, c).to_vector<float>() == grey.select(0, 0).to_vector<float>());
  CHECK(RepeatChannels(3)({zeros({5, 1, 2, 2}), Tensor()}).data.shape() == Shape{5, 3, 2, 2});
  CHECK(RepeatChannels(3)({rgb, Tensor()}).data.to_vector<float>() == rgb.to_vector<float>());
}

TEST_CASE("vision data: augmentation errors name the problem", "[data][vision]") {
  const Tensor img = ramp_image(1, 8, 8);
  CHECK_THAT(error_of([&] {
               resized_crop(img, {6, 0, 4, 4}, 2, 2);
             }),
             Catch::Contains("box (top 6, left 0, height 4, width 4) is not a non-empty part of "
                             "the 8x8 image"));
  CHECK_THAT(error_of([&] {
               resized_crop(img, {0, 0, 8, 8}, 0, 2);
             }),
             Catch::Contains("output size 0x2 must be positive"));
  CHECK_THAT(error_of([&] {
               Resize(2, 2)({zeros({8, 8}, kInt64), Tensor()});
             }),
             Catch::Contains("Resize: expected float32 image data, got int64"));
  CHECK_THAT(error_of([&] {
               Resize(2, 2)({zeros({8}), Tensor()});
             }),
             Catch::Contains("Resize: expected an image [..., H, W], got shape [8]"));
  CHECK_THAT(error_of([] {
               RandomResizedCrop(32, 32, {0.5, 0.2});
             }),
             Catch::Contains("scale (0.5, 0.2) must satisfy 0 < min <= max <= 1"));
  CHECK_THAT(error_of([] {
               RandomResizedCrop(32, 32, {0.5, 1.0}, {2.0, 1.0});
             }),
             Catch::Contains("ratio (2, 1) must satisfy 0 < min <= max"));
  CHECK_THAT(error_of([] { RandomResizedCrop(0, 32); }),
             Catch::Contains("RandomResizedCrop: size 0x32 must be positive"));
  CHECK_THAT(error_of([] { RandomHorizontalFlip(1.5); }),
             Catch::Contains("probability 1.5 is outside [0, 1]"));
  CHECK_THAT(error_of([] {
               RepeatChannels(3)({zeros({2, 4, 4}), Tensor()});
             }),
             Catch::Contains("RepeatChannels: expected 1 or 3 channels, got 2"));
  CHECK_THAT(error_of([] { SampleRandom(0, 0, 0).integer(3, 3); }),
             Catch::Contains("empty range [3, 3)"));
}

TEST_CASE("vision data: augmented batches depend on (seed, epoch, sample), not on threads",
          "[data][vision]") {
  datasets::MnistSplit split;
  split.count = 40, split.rows = 12, split.cols = 10;
  for (int64_t i = 0; i < 40 * 120; ++i) split.images.push_back(static_cast<uint8_t>(i * 7 % 251));
  for (int64_t i = 0; i < 40; ++i) split.labels.push_back(static_cast<uint8_t>(i % 10));
  auto make = [&](uint64_t seed) {
    return augment(datasets::MnistDataset(split),
                   Compose(RandomResizedCrop(16, 16, {0.3, 1.0}), RandomHorizontalFlip(),
                           RepeatChannels(3), Normalize(0.5, 0.25)),
                   seed);
  };
  auto batches = [&](uint64_t seed, int threads, int64_t prefetch) {
    set_num_threads(threads);
    DataLoader loader(make(seed),
                      DataLoaderOptions().batch_size(6).shuffle(true).seed(3).prefetch(prefetch));
    std::vector<std::vector<float>> out;
    for (int e = 0; e < 2; ++e)
      for (auto& b : loader) {
        REQUIRE(b.data.shape() == Shape{b.data.size(0), 3, 16, 16});
        out.push_back(b.data.to_vector<float>());
      }
    set_num_threads(0);
    return out;
  };
  const auto ref = batches(5, 1, 0);
  REQUIRE(ref.size() == 14);
  CHECK(batches(5, 2, 4) == ref);
  CHECK(batches(5, 2, 1) == ref);
  CHECK(batches(6, 1, 0) != ref);
  // The same sample is augmented differently in another epoch, identically when asked again.
  const auto ds = make(5);
  CHECK(ds.get(3, 0).data.to_vector<float>() == ds.get(3, 0).data.to_vector<float>());
  CHECK(ds.get(3, 0).data.to_vector<float>() != ds.get(3, 1).data.to_vector<float>());
  CHECK(ds.get(3).data.to_vector<float>() == ds.get(3, 0).data.to_vector<float>());
  CHECK(ds.get(3, 1).target.item<int64_t>() == 3);
  CHECK_THAT(error_of([&] { ds.get(40, 0); }),
             Catch::Contains("AugmentedDataset::get: index 40 is out of range"));
}

TEST_CASE(
    "vision data: GeneratedImages are normal pixels and uniform labels, a function of the "
    "seed",
    "[data][vision]") {
  datasets::GeneratedImagesOptions o;
  o.size = 300, o.channels = 3, o.height = 7, o.width = 5, o.num_classes = 4, o.seed = 9;
  const datasets::GeneratedImages gen(o);
  const std::vector<int64_t> idx = {4, 0, 299};
  const Example b = gen.get_batch(idx);
  REQUIRE(b.data.shape() == Shape{3, 3, 7, 5});
  for (size_t k = 0; k < idx.size(); ++k) {
    const Example s = gen.get(idx[k]);
    CHECK(s.data.to_vector<float>() == b.data.select(0, int64_t(k)).to_vector<float>());
    CHECK(s.target.item<int64_t>() == b.target.to_vector<int64_t>()[k]);
  }
  std::vector<int64_t> all(300);
  for (int64_t i = 0; i < 300; ++i) all[static_cast<size_t>(i)] = i;
  const Example e = gen.get_batch(all);
  const auto px = e.data.to_vector<float>();
  double sum = 0, sq = 0;
  for (float p : px) sum += p, sq += double(p) * p;
  const double mean = sum / double(px.size()), var = sq / double(px.size()) - mean * mean;
  CHECK(std::abs(mean) < 0.03);
  CHECK(std::abs(var - 1.0) < 0.05);
  std::vector<int> counts(4);
  for (int64_t l : e.target.to_vector<int64_t>()) {
    REQUIRE(l >= 0);
    REQUIRE(l < 4);
    ++counts[static_cast<size_t>(l)];
  }
  for (int c : counts) CHECK(c > 50);
  o.seed = 10;
  CHECK(datasets::GeneratedImages(o).get(4).data.to_vector<float>() !=
        gen.get(4).data.to_vector<float>());
  o.num_classes = 0;
  CHECK_THAT(error_of([&] { datasets::GeneratedImages{o}; }),
             Catch::Contains("num_classes 0 must be >= 1"));
}

TEST_CASE("vision data: image sets, their statistics and errors", "[data][vision]") {
  datasets::MnistSplit s;
  s.count = 2, s.rows = 1, s.cols = 2;
  s.images = {0, 255, 51, 102};
  s.labels = {0, 1};
  const auto [mean, sd] = datasets::pixel_statistics(s);
  const double m = (0 + 1 + 0.2 + 0.4) / 4.0;
  const double var =
      ((0 - m) * (0 - m) + (1 - m) * (1 - m) + (0.2 - m) * (0.2 - m) + (0.4 - m) * (0.4 - m)) / 4.0;
  CHECK(mean == Approx(m).epsilon(1e-12));
  CHECK(sd == Approx(std::sqrt(var)).epsilon(1e-9));
  CHECK_THAT(error_of([] { datasets::load_image_set("/nonexistent/vision/set"); }),
             Catch::Contains("'/nonexistent/vision/set' is neither 'mnist', 'fashion-mnist' nor a "
                             "directory of IDX files"));
  CHECK_THAT(error_of([] { datasets::load_image_set(""); }),
             Catch::Contains("no name or directory given"));
}

TEST_CASE("vision data: Fashion-MNIST from the data cache", "[data][vision][mnist]") {
  datasets::ImageSet set;
  try {
    set = datasets::load_image_set("fashion-mnist");
  } catch (const Error& e) {
    WARN("Fashion-MNIST not in the data cache, skipping (" << e.what() << ")");
    return;
  }
  CHECK(set.train.count == 60000);
  CHECK(set.test.count == 10000);
  CHECK(set.class_names.size() == 10);
  // Zalando's published training-set statistics.
  CHECK(set.mean == Approx(0.2860).margin(0.001));
  CHECK(set.stddev == Approx(0.3530).margin(0.001));
  std::vector<int> counts(10);
  for (uint8_t l : set.test.labels) ++counts[l];
  for (int c : counts) CHECK(c == 1000);
}
