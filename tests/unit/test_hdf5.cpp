// Tests of the HDF5 RAII layer: typed round trips, groups, attributes, corrupt files, atomic saves.
#include <ipuml/io/hdf5.hpp>

#if IPUML_WITH_HDF5

#include <hdf5.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../support/error_of.hpp"
#include "../support/temp_dir.hpp"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ipuml::io::H5Dtype;
using ipuml::io::H5File;

namespace {

// A fresh directory per test case, removed afterwards.
struct TempDir : ipuml::testing::TempDir {
  TempDir() : ipuml::testing::TempDir("ipuml_test_hdf5") {}
};

int64_t numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

template <typename T>
void round_trip(const std::string& file, H5Dtype dtype, const std::vector<int64_t>& shape) {
  std::vector<T> data(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<T>((i * 7 + 3) % 11);
  {
    H5File f(file, H5File::Mode::truncate);
    f.write("d", dtype, shape, data.data());
  }
  H5File f(file);
  auto info = f.info("d");
  CHECK(info.dtype == dtype);
  CHECK(info.shape == shape);
  std::vector<int64_t> got_shape;
  std::vector<T> back = f.read_vector<T>("d", dtype, &got_shape);
  CHECK(got_shape == shape);
  CHECK(back == data);
}

using ipuml::testing::error_of;

}  // namespace

TEST_CASE("hdf5 round trips every dtype and shape", "[hdf5]") {
  TempDir dir;
  const std::string file = dir.file("rt.h5");
  const std::vector<std::vector<int64_t>> shapes = {{},  {0},       {3, 0},      {1},
                                                    {5}, {2, 3, 4}, {1, 1, 1, 2}};
  for (const auto& shape : shapes) {
    INFO("shape " << ipuml::detail::str(shape));
    round_trip<float>(file, H5Dtype::float32, shape);
    round_trip<double>(file, H5Dtype::float64, shape);
    round_trip<uint16_t>(file, H5Dtype::float16, shape);
    round_trip<uint16_t>(file, H5Dtype::bfloat16, shape);
    round_trip<int8_t>(file, H5Dtype::int8, shape);
    round_trip<int32_t>(file, H5Dtype::int32, shape);
    round_trip<int64_t>(file, H5Dtype::int64, shape);
    round_trip<uint8_t>(file, H5Dtype::uint8, shape);
    round_trip<uint16_t>(file, H5Dtype::uint16, shape);
    round_trip<uint8_t>(file, H5Dtype::boolean, shape);
  }
}

TEST_CASE("hdf5 typed write/read helpers pick the dtype from the element type", "[hdf5]") {
  TempDir dir;
  const std::string file = dir.file("typed.h5");
  const std::vector<float> w = {1.5f, -2.f, 3.25f, 0.f, 1e-30f, 7.f};
  const bool flags[3] = {true, false, true};
  {
    H5File f(file, H5File::Mode::truncate);
    f.write("w", {2, 3}, w);
    f.write("flags", {3}, flags);
    f.write("big", {2}, std::vector<int64_t>{int64_t{1} << 40, -5});
    f.write("x", {}, std::vector<float>{42.f});
  }
  H5File f(file);
  std::vector<int64_t> shape;
  CHECK(f.read_vector<float>("w", &shape) == w);
  CHECK(shape == std::vector<int64_t>{2, 3});
  CHECK(f.read_vector<int64_t>("big") == std::vector<int64_t>{int64_t{1} << 40, -5});
  CHECK(f.read_vector<uint8_t>("flags", H5Dtype::boolean) == std::vector<uint8_t>{1, 0, 1});
  CHECK(f.info("flags").type_name == "bool");
  CHECK(f.read_vector<float>("x", &shape) == std::vector<float>{42.f});
  CHECK(shape.empty());
  float out[6];
  f.read("w", H5Dtype::float32, {2, 3}, out);
  CHECK(out[2] == 3.25f);
  float rows[3];
  f.read_rows("w", H5Dtype::float32, 1, 1, rows);
  CHECK(rows[0] == 0.f);
  CHECK(rows[2] == 7.f);
  CHECK_THROWS_WITH(f.read_rows("w", H5Dtype::float32, 1, 2, rows),
                    Catch::Contains("outside the 2 rows"));
  CHECK_THROWS_WITH(f.write("y", {1}, std::vector<float>{1.f}), Catch::Contains("read-only"));
  CHECK_THROWS_WITH(
      [&] {
        H5File g(dir.file("count.h5"), H5File::Mode::truncate);
        g.write("z", {2, 2}, std::vector<float>{1.f});
      }(),
      Catch::Contains("holds 4 elements but 1 were given"));
}

TEST_CASE("hdf5 float16 is a real IEEE half in the file and bfloat16 is tagged uint16", "[hdf5]") {
  TempDir dir;
  const std::string file = dir.file("half.h5");
  // 1.0, -2.0, 0.5, 65504 (largest half)
  const std::vector<uint16_t> half = {0x3C00, 0xC000, 0x3800, 0x7BFF};
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC000};  // 1.0, -2.0
  {
    H5File f(file, H5File::Mode::truncate);
    f.write("h", H5Dtype::float16, {4}, half.data());
    f.write("b", H5Dtype::bfloat16, {2}, bf16.data());
  }
  {
    H5File f(file);
    CHECK(f.info("h").type_name == "float16");
    CHECK(f.attr_string("b", "ipuml_dtype") == "bfloat16");
    CHECK(f.read_vector<uint16_t>("b", H5Dtype::bfloat16) == bf16);
    // uint16 and bfloat16 are different dtypes even though both are 16 bits.
    CHECK_THROWS_WITH(f.read_vector<uint16_t>("b"),
                      Catch::Contains("found dtype bfloat16, expected uint16"));
  }
  // Any HDF5 reader converting to float sees the values, not the bits.
  hid_t fid = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(fid >= 0);
  hid_t ds = H5Dopen2(fid, "/h", H5P_DEFAULT);
  float values[4] = {};
  REQUIRE(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
  H5Dclose(ds);
  H5Fclose(fid);
  CHECK(values[0] == 1.f);
  CHECK(values[1] == -2.f);
  CHECK(values[2] == 0.5f);
  CHECK(values[3] == 65504.f);
}

TEST_CASE("hdf5 nested groups, listing and existence", "[hdf5]") {
  TempDir dir;
  const std::string file = dir.file("groups.h5");
  {
    H5File f(file, H5File::Mode::truncate);
    f.create_group("layer1/conv");
    f.create_group("layer1/conv");  // existing is fine
    f.write("layer1/conv/weight", {2}, std::vector<float>{1.f, 2.f});
    f.write("/layer2/bn/running_mean", {1}, std::vector<float>{0.f});  // parents made on the way
    f.write("top", {}, std::vector<int32_t>{7});
    CHECK_THROWS_WITH(f.create_group("top"), Catch::Contains("a dataset already has this name"));
    CHECK_THROWS_WITH(f.create_group("top/sub"), Catch::Contains("top/sub"));
  }
  H5File f(file);
  CHECK(f.list() == std::vector<std::string>{"layer1", "layer2", "top"});
  CHECK(f.list("layer1") == std::vector<std::string>{"conv"});
  CHECK(f.list("/layer2/bn/") == std::vector<std::string>{"running_mean"});
  CHECK(f.exists("layer1/conv/weight"));
  CHECK(f.exists("/"));
  CHECK_FALSE(f.exists("layer1/nope"));
  CHECK_FALSE(f.exists("nope/deeper/still"));
  CHECK_FALSE(f.exists("top/below_a_dataset"));
  CHECK(f.is_group("layer1/conv"));
  CHECK_FALSE(f.is_group("layer1/conv/weight"));
  CHECK(f.is_dataset("layer1/conv/weight"));
  CHECK_THROWS_WITH(f.list("top"), Catch::Contains("found a dataset, expected a group"));
  CHECK_THROWS_WITH(f.list("missing"), Catch::Contains("no such group"));
}

TEST_CASE("hdf5 read_write mode replaces datasets and removes objects", "[hdf5]") {
  TempDir dir;
  const std::string file = dir.file("rw.h5");
  {
    H5File f(file, H5File::Mode::truncate);
    f.write("a", {2}, std::vector<int32_t>{1, 2});
    f.write("b", {1}, std::vector<int32_t>{3});
  }
  {
    H5File f(file, H5File::Mode::read_write);
    f.write("a", {3}, std::vector<float>{1.f, 2.f, 3.f});
    f.remove("b");
  }
  H5File f(file);
  CHECK(f.list() == std::vector<std::string>{"a"});
  CHECK(f.read_vector<float>("a") == std::vector<float>{1.f, 2.f, 3.f});
}

TEST_CASE("hdf5 attributes: strings, numbers, lists, on any object", "[hdf5]") {
  TempDir dir;
  const std::string file = dir.file("attrs.h5");
  {
    H5File f(file, H5File::Mode::truncate);
    f.write("g/w", {1}, std::vector<float>{1.f});
    f.set_attr("/", "format", "ipuml-checkpoint");
    f.set_attr("/", "version", 3);
    f.set_attr("g", "lr", 0.125);
    f.set_attr("g", "empty", std::string());
    f.set_attr("g/w", "shape_hint", std::vector<int64_t>{4, 1600});
    f.set_attr("g/w", "scales", std::vector<double>{0.5, 2.0});
    f.set_attr("g/w", "flag", true);
    f.set_attr("/", "version", 4);  // overwrite
    f.write_string("meta.JSON", R"({"numPar": 15})");
  }
  H5File f(file);
  CHECK(f.attr_string("/", "format") == "ipuml-checkpoint");
  CHECK(f.attr_int("/", "version") == 4);
  CHECK(f.attr_double("/", "version") == 4.0);
  CHECK(f.attr_double("g", "lr") == 0.125);
  CHECK(f.attr_string("g", "empty").empty());
  CHECK(f.attr_ints("g/w", "shape_hint") == std::vector<int64_t>{4, 1600});
  CHECK(f.attr_doubles("g/w", "scales") == std::vector<double>{0.5, 2.0});
  CHECK(f.attr_int("g/w", "flag") == 1);
  CHECK(f.has_attr("g", "lr"));
  CHECK_FALSE(f.has_attr("g", "momentum"));
  CHECK(f.attr_names("/") == std::vector<std::string>{"format", "version"});
  CHECK(f.read_string("meta.JSON") == R"({"numPar": 15})");
  CHECK(f.info("meta.JSON").dtype == H5Dtype::other);
  CHECK_THROWS_WITH(f.attr_int("g", "lr"), Catch::Contains("expected integers"));
  CHECK_THROWS_WITH(f.attr_string("g", "lr"), Catch::Contains("expected a string"));
  CHECK_THROWS_WITH(f.attr_int("g", "momentum"), Catch::Contains("no attribute 'momentum'"));
  CHECK_THROWS_WITH(f.attr_int("g/w", "shape_hint"), Catch::Contains("expected one"));
  CHECK_THROWS_WITH(f.attr_string("nowhere", "x"), Catch::Contains("no such object"));
  CHECK_THROWS_WITH(f.read_vector<float>("meta.JSON"), Catch::Contains("string"));
}

TEST_CASE("hdf5 errors name the file, the object, what was found and what was expected", "[hdf5]") {
  TempDir dir;
  const std::string file = dir.file("model.h5");
  {
    H5File f(file, H5File::Mode::truncate);
    f.write("layer1/weight", {2, 3}, std::vector<float>(6, 1.f));
    f.write("layer1/bias", {3}, std::vector<float>(3, 0.f));
  }
  H5File f(file);
  std::string msg = error_of([&] { f.read_vector<float>("layer1/wieght"); });
  CHECK_THAT(msg, Catch::Contains(file) && Catch::Contains("/layer1/wieght") &&
                      Catch::Contains("no such dataset") && Catch::Contains("bias, weight"));
  msg = error_of([&] { f.read_vector<float>("layer9/w"); });
  CHECK_THAT(msg, Catch::Contains("'/layer9' does not exist"));
  float buf[6];
  msg = error_of([&] { f.read("layer1/weight", H5Dtype::float32, {3, 2}, buf); });
  CHECK_THAT(msg, Catch::Contains(file) && Catch::Contains("found shape [2, 3], expected [3, 2]"));
  msg = error_of([&] { f.read("layer1/weight", H5Dtype::int32, {2, 3}, buf); });
  CHECK_THAT(msg, Catch::Contains("/layer1/weight") &&
                      Catch::Contains("found dtype float32, expected int32"));
  msg = error_of([&] { f.info("layer1"); });
  CHECK_THAT(msg, Catch::Contains("found a group, expected a dataset"));
}

TEST_CASE("hdf5 missing, foreign, corrupt and truncated files throw", "[hdf5]") {
  TempDir dir;
  CHECK_THROWS_WITH(H5File(dir.file("absent.h5")),
                    Catch::Contains("absent.h5") && Catch::Contains("no such file"));
  CHECK_THROWS_WITH(H5File(dir.path.string()), Catch::Contains("directory"));
  CHECK_THROWS_WITH(H5File(dir.file("no_dir/x.h5"), H5File::Mode::truncate),
                    Catch::Contains("cannot create"));

  const std::string garbage = dir.file("garbage.h5");
  {
    std::ofstream out(garbage, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>((i * 131) & 0xff));
  }
  CHECK_THROWS_WITH(H5File(garbage),
                    Catch::Contains("garbage.h5") && Catch::Contains("not an HDF5 file"));
  const std::string empty = dir.file("empty.h5");
  std::ofstream(empty).close();
  CHECK_THROWS_WITH(H5File(empty), Catch::Contains("not an HDF5 file"));

  // A real file cut short: the signature is there but the data is not.
  const std::string real = dir.file("real.h5");
  {
    H5File f(real, H5File::Mode::truncate);
    f.write("data", {1000}, std::vector<double>(1000, 3.0));
  }
  const auto full_size = fs::file_size(real);
  for (uintmax_t keep : {full_size / 2, uintmax_t{100}, uintmax_t{4}}) {
    const std::string cut = dir.file("cut_" + std::to_string(keep) + ".h5");
    fs::copy_file(real, cut);
    fs::resize_file(cut, keep);
    INFO("kept " << keep << " of " << full_size << " bytes");
    CHECK_THROWS_AS(H5File(cut), ipuml::Error);
    CHECK_THROWS_WITH(H5File(cut), Catch::Contains(cut));
  }
  // Garbage over the object headers: opening may succeed, using the file must not.
  const std::string smashed = dir.file("smashed.h5");
  fs::copy_file(real, smashed);
  {
    std::fstream io(smashed, std::ios::binary | std::ios::in | std::ios::out);
    io.seekp(96);
    for (int i = 0; i < 1024; ++i) io.put(static_cast<char>(0xA5));
  }
  bool threw = false;
  std::vector<double> back;
  try {
    H5File f(smashed);
    back = f.read_vector<double>("data");
  } catch (const ipuml::Error&) {
    threw = true;
  }
  CHECK((threw || back == std::vector<double>(1000, 3.0)));
}

TEST_CASE("hdf5 atomic_write replaces the file only when the writer succeeds", "[hdf5]") {
  TempDir dir;
  const std::string file = dir.file("ckpt.h5");
  ipuml::io::atomic_write(file, [](H5File& f) { f.write("step", {}, std::vector<int64_t>{1}); });
  CHECK(H5File(file).read_vector<int64_t>("step") == std::vector<int64_t>{1});

  CHECK_THROWS_WITH(
      ipuml::io::atomic_write(file,
                              [](H5File& f) {
                                f.write("step", {}, std::vector<int64_t>{2});
                                f.write("half_written", {3}, std::vector<float>{1.f, 2.f, 3.f});
                                ipuml::fail("writer failed midway");
                              }),
      Catch::Contains("writer failed midway"));
  {
    H5File f(file);
    CHECK(f.read_vector<int64_t>("step") == std::vector<int64_t>{1});
    CHECK_FALSE(f.exists("half_written"));
  }
  // No temporary file is left behind.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);

  ipuml::io::atomic_write(file, [](H5File& f) { f.write("step", {}, std::vector<int64_t>{3}); });
  CHECK(H5File(file).read_vector<int64_t>("step") == std::vector<int64_t>{3});
}

TEST_CASE("hdf5 files move and close cleanly", "[hdf5]") {
  TempDir dir;
  H5File a(dir.file("a.h5"), H5File::Mode::truncate);
  a.write("x", {1}, std::vector<float>{1.f});
  H5File b = std::move(a);
  CHECK_FALSE(a.is_open());
  CHECK(b.is_open());
  b.flush();
  b.close();
  b.close();  // idempotent
  CHECK_THROWS_WITH(b.exists("x"), Catch::Contains("closed"));
  CHECK(H5File(dir.file("a.h5")).exists("x"));
}

#endif  // IPUML_WITH_HDF5
