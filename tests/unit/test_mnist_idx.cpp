// Tests of the MNIST IDX reader on small generated files, plus the real data when it is cached.
#include <ipuml/datasets/mnist.hpp>

#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>

#include "../support/temp_dir.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include "../support/mnist_cache.hpp"

namespace fs = std::filesystem;
using ipuml::datasets::MnistSplit;

namespace {

// A fresh directory per test case, removed afterwards.
struct TempDir : ipuml::testing::TempDir {
  TempDir() : ipuml::testing::TempDir("ipuml_test_mnist") {}
};

// Restores an environment variable when the test ends.
struct EnvGuard {
  std::string name;
  std::optional<std::string> old;
  EnvGuard(std::string n, const std::optional<std::string>& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
  ~EnvGuard() {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                               const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  auto put = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes, bool gz = false) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    if (!bytes.empty()) REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) > 0);
    gzclose(f);
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
}

// Five 28x28 images whose pixel (r, c) of image i is (i * 31 + r * 28 + c) mod 256.
constexpr int kCount = 5;
const std::vector<uint8_t> kLabels = {5, 0, 4, 1, 9};

std::vector<uint8_t> image_payload(int count = kCount) {
  std::vector<uint8_t> px;
  for (int i = 0; i < count; ++i)
    for (int p = 0; p < 28 * 28; ++p) px.push_back(static_cast<uint8_t>((i * 31 + p) % 256));
  return px;
}

std::vector<uint8_t> images_file(int count = kCount) {
  return idx_bytes(2051, {uint32_t(count), 28, 28}, image_payload(count));
}
std::vector<uint8_t> labels_file(const std::vector<uint8_t>& labels = kLabels) {
  return idx_bytes(2049, {uint32_t(labels.size())}, labels);
}

// Writes a complete small data set under `dir` with the standard names.
void write_split(const fs::path& dir, bool train, bool gz) {
  const std::string suffix = gz ? ".gz" : "";
  write_file(
      (dir / ((train ? "train" : "t10k") + std::string("-images-idx3-ubyte") + suffix)).string(),
      images_file(), gz);
  write_file(
      (dir / ((train ? "train" : "t10k") + std::string("-labels-idx1-ubyte") + suffix)).string(),
      labels_file(), gz);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ipuml::Error& e) {
    return e.what();
  }
  return "(no error)";
}

void check_small(const MnistSplit& s) {
  CHECK(s.count == kCount);
  CHECK(s.rows == 28);
  CHECK(s.cols == 28);
  CHECK(s.labels == kLabels);
  CHECK(s.images == image_payload());
}

}  // namespace

TEST_CASE("mnist reads plain and gzip'ed IDX files", "[mnist]") {
  TempDir dir;
  for (bool gz : {false, true}) {
    INFO("gz " << gz);
    const std::string img = dir.file(gz ? "img.gz" : "img"), lab = dir.file(gz ? "lab.gz" : "lab");
    write_file(img, images_file(), gz);
    write_file(lab, labels_file(), gz);
    check_small(ipuml::datasets::read_mnist(img, lab));
  }
  // An empty set is well-formed.
  write_file(dir.file("img0"), images_file(0));
  write_file(dir.file("lab0"), labels_file({}));
  MnistSplit empty = ipuml::datasets::read_mnist(dir.file("img0"), dir.file("lab0"));
  CHECK(empty.count == 0);
  CHECK(empty.images.empty());
}

TEST_CASE("mnist load_mnist picks the split and the .gz fallback", "[mnist]") {
  TempDir dir;
  write_split(dir.path, true, false);
  write_split(dir.path, false, true);
  check_small(ipuml::datasets::load_mnist(dir.path.string(), true));
  check_small(ipuml::datasets::load_mnist(dir.path.string(), false));
  CHECK(ipuml::datasets::find_mnist_dir(dir.path.string()) == dir.path.string());
}

TEST_CASE("mnist malformed files give errors naming the file", "[mnist]") {
  TempDir dir;
  const std::string img = dir.file("images-idx3"), lab = dir.file("labels-idx1");
  write_file(lab, labels_file());
  auto images_error = [&](const std::vector<uint8_t>& bytes, bool gz = false) {
    write_file(img, bytes, gz);
    return error_of([&] { ipuml::datasets::read_mnist(img, lab); });
  };

  SECTION("wrong magic") {
    auto msg = images_error(idx_bytes(2049, {kCount, 28, 28}, image_payload()));
    CHECK_THAT(msg, Catch::Contains(img) && Catch::Contains("magic number 2049") &&
                        Catch::Contains("expected 2051"));
    msg = images_error({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
    CHECK_THAT(msg, Catch::Contains(img) && Catch::Contains("magic"));
  }
  SECTION("truncated data") {
    auto bytes = images_file();
    bytes.resize(bytes.size() - 100);
    auto msg = images_error(bytes);
    CHECK_THAT(msg,
               Catch::Contains(img) && Catch::Contains("truncated") && Catch::Contains("3920"));
    CHECK_THAT(images_error(bytes, true), Catch::Contains(img) && Catch::Contains("truncated"));
  }
  SECTION("truncated header") {
    auto msg = images_error({0, 0, 8, 3, 0, 0});
    CHECK_THAT(msg, Catch::Contains(img) && Catch::Contains("truncated"));
    CHECK_THAT(images_error({0, 0}), Catch::Contains(img) && Catch::Contains("too short"));
    CHECK_THAT(images_error({}), Catch::Contains(img) && Catch::Contains("too short"));
  }
  SECTION("trailing garbage") {
    auto bytes = images_file();
    bytes.push_back(0);
    auto msg = images_error(bytes);
    CHECK_THAT(msg, Catch::Contains(img) && Catch::Contains("trailing bytes"));
    CHECK_THAT(images_error(bytes, true),
               Catch::Contains(img) && Catch::Contains("trailing bytes"));
  }
  SECTION("implausible header") {
    auto msg = images_error(idx_bytes(2051, {0xFFFFFFFFu, 0xFFFFFFFFu, 28}, {}));
    CHECK_THAT(msg, Catch::Contains(img) && Catch::Contains("not plausible"));
  }
  SECTION("corrupt gzip stream") {
    write_file(img, images_file(), true);
    auto size = fs::file_size(img);
    fs::resize_file(img, size / 2);
    auto msg = error_of([&] { ipuml::datasets::read_mnist(img, lab); });
    CHECK_THAT(msg, Catch::Contains(img));
  }
  SECTION("count mismatch") {
    write_file(img, images_file(4));
    auto msg = error_of([&] { ipuml::datasets::read_mnist(img, lab); });
    CHECK_THAT(msg, Catch::Contains(img) && Catch::Contains(lab) && Catch::Contains("4 images") &&
                        Catch::Contains("5 labels"));
  }
  SECTION("bad label value") {
    write_file(img, images_file());
    write_file(lab, labels_file({5, 0, 10, 1, 9}));
    auto msg = error_of([&] { ipuml::datasets::read_mnist(img, lab); });
    CHECK_THAT(msg, Catch::Contains(lab) && Catch::Contains("label 10 at index 2"));
  }
  SECTION("labels file given as images") {
    auto msg = error_of([&] { ipuml::datasets::read_mnist(lab, lab); });
    CHECK_THAT(msg, Catch::Contains(lab) && Catch::Contains("a label file"));
  }
  SECTION("missing file") {
    auto msg = error_of([&] { ipuml::datasets::read_mnist(dir.file("nope-idx3"), lab); });
    CHECK_THAT(msg, Catch::Contains("nope-idx3") && Catch::Contains("scripts/fetch-data.sh mnist"));
  }
}

TEST_CASE("mnist missing data says how to fetch it and where it looked", "[mnist]") {
  TempDir dir;
  EnvGuard data("IPUML_DATA_DIR", dir.file("data"));
  EnvGuard xdg("XDG_CACHE_HOME", dir.file("xdg"));
  auto msg = error_of([&] { ipuml::datasets::load_mnist(dir.path.string(), true); });
  CHECK_THAT(msg, Catch::Contains("train-images-idx3-ubyte") &&
                      Catch::Contains("scripts/fetch-data.sh mnist") &&
                      Catch::Contains(dir.path.string()));

  msg = error_of([&] { ipuml::datasets::find_mnist_dir(dir.file("hint")); });
  CHECK_THAT(msg, Catch::Contains("scripts/fetch-data.sh mnist") &&
                      Catch::Contains(dir.file("hint")) &&
                      Catch::Contains(dir.file("data") + "/mnist") &&
                      Catch::Contains(dir.file("xdg") + "/ipuml/mnist"));

  // Only one split present: not a complete data set.
  fs::create_directories(dir.path / "data" / "mnist");
  write_split(dir.path / "data" / "mnist", true, false);
  CHECK_THROWS_AS(ipuml::datasets::find_mnist_dir(), ipuml::Error);
  write_split(dir.path / "data" / "mnist", false, true);
  CHECK(ipuml::datasets::find_mnist_dir() == dir.file("data") + "/mnist");
  check_small(ipuml::datasets::load_mnist("", false));

  // The XDG cache is searched when IPUML_DATA_DIR is unset.
  EnvGuard no_data("IPUML_DATA_DIR", std::nullopt);
  fs::create_directories(dir.path / "xdg" / "ipuml" / "mnist");
  write_split(dir.path / "xdg" / "ipuml" / "mnist", true, true);
  write_split(dir.path / "xdg" / "ipuml" / "mnist", false, false);
  CHECK(ipuml::datasets::find_mnist_dir() == dir.file("xdg") + "/ipuml/mnist");
}

TEST_CASE("mnist real data from the cache", "[mnist][data]") {
  const std::string dir = ipuml::testing::cached_mnist_dir();
  if (dir.empty()) return;
  MnistSplit train = ipuml::datasets::load_mnist(dir, true);
  CHECK(train.count == 60000);
  CHECK(train.rows == 28);
  CHECK(train.cols == 28);
  CHECK(train.images.size() == size_t{60000} * 28 * 28);
  CHECK(std::vector<uint8_t>(train.labels.begin(), train.labels.begin() + 10) ==
        std::vector<uint8_t>{5, 0, 4, 1, 9, 2, 1, 3, 1, 4});
  MnistSplit test = ipuml::datasets::load_mnist(dir, false);
  CHECK(test.count == 10000);
  CHECK(std::vector<uint8_t>(test.labels.begin(), test.labels.begin() + 10) ==
        std::vector<uint8_t>{7, 2, 1, 0, 4, 1, 4, 9, 5, 9});
  // Pixels are ink on a zero background: the border of the first image is empty.
  CHECK(train.images[0] == 0);
  CHECK(*std::max_element(train.images.begin(), train.images.begin() + 784) == 255);
}
