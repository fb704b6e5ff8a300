// The cellSpike reader and generator: shares, layout and shuffles of the streaming loader against
// files whose every value names its row; float16 files; the simulated neuron; and clear errors on
// truncated, corrupted and wrong-shaped files.
#include <ipuml/core/dtype.hpp>
#include <ipuml/datasets/cellspike.hpp>
#include <ipuml/datasets/cellspike_gen.hpp>
#include <ipuml/io/hdf5.hpp>

#include <catch2/catch.hpp>

#include "../support/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace ipuml;
namespace fs = std::filesystem;

namespace {

struct TempDir : ipuml::testing::TempDir {
  TempDir() : ipuml::testing::TempDir("ipuml_test_cellspike") {}
};

constexpr int64_t kT = 8, kF = 4, kP = 3;

// frames[i, t, f] = i + t/8 + f/32 and pars[i, k] = i + k/4: every value says its row, and all
// are exact in float16 for i < 64.
float frame_value(int64_t i, int64_t t, int64_t f) {
  return static_cast<float>(i) + static_cast<float>(t) / 8.0f + static_cast<float>(f) / 32.0f;
}
float par_value(int64_t i, int64_t k) {
  return static_cast<float>(i) + static_cast<float>(k) / 4.0f;
}

void write_split(io::H5File& f, const std::string& split, int64_t n, bool fp16) {
  std::vector<float> fr(static_cast<size_t>(n * kT * kF)), pa(static_cast<size_t>(n * kP));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = 0; t < kT; ++t)
      for (int64_t c = 0; c < kF; ++c)
        fr[static_cast<size_t>((i * kT + t) * kF + c)] = frame_value(i, t, c);
    for (int64_t k = 0; k < kP; ++k) pa[static_cast<size_t>(i * kP + k)] = par_value(i, k);
  }
  if (!fp16) {
    f.write(split + "_frames", {n, kT, kF}, fr);
    f.write(split + "_unitStar_par", {n, kP}, pa);
    return;
  }
  auto half = [](const std::vector<float>& v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_half_bits(v[i]);
    return h;
  };
  f.write(split + "_frames", io::H5Dtype::float16, {n, kT, kF}, half(fr).data());
  f.write(split + "_unitStar_par", io::H5Dtype::float16, {n, kP}, half(pa).data());
}

std::string make_file(const TempDir& dir, const std::string& name, int64_t n, bool fp16 = false) {
  const std::string path = dir.file(name);
  io::H5File f(path, io::H5File::Mode::truncate);
  for (const char* s : {"train", "val", "test"}) write_split(f, s, n, fp16);
  return path;
}

// The row ids of a batch, checking that every value of each row is that row's.
std::vector<int64_t> row_ids(const data::Example& b) {
  REQUIRE(b.data.dim() == 3);
  const int64_t rows = b.data.size(0);
  REQUIRE(b.data.size(1) == kT);
  REQUIRE(b.data.size(2) == kF);
  REQUIRE(b.target.size(0) == rows);
  REQUIRE(b.target.size(1) == kP);
  const auto x = b.data.to_vector<float>(), y = b.target.to_vector<float>();
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t id = static_cast<int64_t>(y[static_cast<size_t>(r * kP)]);
    for (int64_t k = 0; k < kP; ++k) CHECK(y[static_cast<size_t>(r * kP + k)] == par_value(id, k));
    for (int64_t t = 0; t < kT; ++t)
      for (int64_t c = 0; c < kF; ++c)
        CHECK(x[static_cast<size_t>((r * kT + t) * kF + c)] == frame_value(id, t, c));
    ids.push_back(id);
  }
  return ids;
}

std::vector<std::vector<int64_t>> epoch_ids(datasets::CellSpikeLoader& l, uint64_t epoch) {
  l.start_epoch(epoch);
  std::vector<std::vector<int64_t>> out;
  data::Example b;
  while (l.next(b)) out.push_back(row_ids(b));
  return out;
}

}  // namespace

TEST_CASE("cellSpike loader: contiguous shares, [step][replica][micro] layout, shuffle within",
          "[cellspike]") {
  TempDir dir;
  const bool fp16 = GENERATE(false, true);
  const std::string path = make_file(dir, "c.h5", 50, fp16);
  const auto info = datasets::inspect_cellspike(path, "train", kT, kF, kP);
  CHECK(info.samples == 50);
  CHECK(info.frames_dtype == (fp16 ? io::H5Dtype::float16 : io::H5Dtype::float32));
  CHECK(info.bytes_per_sample() == (fp16 ? 2 : 4) * (kT * kF + kP));

  // 48 of the 50 samples, 4 shares of 12; this loader feeds shares 1 and 2; blocks of 5 rows,
  // windows of 2 blocks; batches of 2 steps x 2 replicas x 2 rows: 3 per epoch (12 / 4).
  auto opts = datasets::CellSpikeLoaderOptions()
                  .micro_batch(2)
                  .steps_per_batch(2)
                  .num_shards(4)
                  .first_shard(1)
                  .local_shards(2)
                  .max_samples(48)
                  .seed(7)
                  .block_rows(5)
                  .window_blocks(2);
  datasets::CellSpikeLoader loader(path, opts);
  CHECK(loader.shard_size() == 12);
  CHECK(loader.size() == 3);
  CHECK(loader.batch_rows() == 8);
  const auto e0 = epoch_ids(loader, 0);
  REQUIRE(e0.size() == 3);
  std::vector<int64_t> seen[2];
  for (auto& b : e0)
    for (int64_t step = 0; step < 2; ++step)
      for (int64_t rep = 0; rep < 2; ++rep)
        for (int64_t m = 0; m < 2; ++m) {
          const int64_t id = b[static_cast<size_t>((step * 2 + rep) * 2 + m)];
          const int64_t share = 1 + rep;
          CHECK(id >= share * 12);
          CHECK(id < (share + 1) * 12);
          seen[rep].push_back(id);
        }
  for (int rep = 0; rep < 2; ++rep) {  // every sample of the share exactly once, shuffled
    auto s = seen[rep];
    std::sort(s.begin(), s.end());
    std::vector<int64_t> all(12);
    for (int64_t i = 0; i < 12; ++i) all[static_cast<size_t>(i)] = (1 + rep) * 12 + i;
    CHECK(s == all);
    CHECK(seen[rep] != all);
  }
  // The same epoch again is the same order; the next one differs.
  CHECK(epoch_ids(loader, 0) == e0);
  CHECK(epoch_ids(loader, 1) != e0);
  CHECK(loader.stats().rows > 0);
  CHECK(loader.stats().bytes == loader.stats().rows * info.bytes_per_sample());

  // Two loaders of one share each (two instances) give exactly the rows of the two-share one.
  datasets::CellSpikeLoader a(path, opts.local_shards(1).first_shard(1)),
      b(path, datasets::CellSpikeLoaderOptions(opts).local_shards(1).first_shard(2));
  const auto ea = epoch_ids(a, 0), eb = epoch_ids(b, 0);
  for (size_t i = 0; i < e0.size(); ++i)
    for (int64_t step = 0; step < 2; ++step)
      for (int64_t m = 0; m < 2; ++m) {
        CHECK(e0[i][static_cast<size_t>((step * 2 + 0) * 2 + m)] ==
              ea[i][static_cast<size_t>(step * 2 + m)]);
        CHECK(e0[i][static_cast<size_t>((step * 2 + 1) * 2 + m)] ==
              eb[i][static_cast<size_t>(step * 2 + m)]);
      }

  // Without shuffle, without prefetch: the share in file order.
  datasets::CellSpikeLoader seq(path, datasets::CellSpikeLoaderOptions()
                                          .split("val")
                                          .micro_batch(5)
                                          .num_shards(2)
                                          .first_shard(1)
                                          .shuffle(false)
                                          .prefetch(false)
                                          .block_rows(3));
  const auto es = epoch_ids(seq, 3);
  REQUIRE(es.size() == 5);
  for (size_t i = 0; i < es.size(); ++i)
    for (int64_t m = 0; m < 5; ++m)
      CHECK(es[i][static_cast<size_t>(m)] == 25 + static_cast<int64_t>(i) * 5 + m);
}

TEST_CASE("cellSpike generator: the layout, reproducible samples and a neuron that spikes",
          "[cellspike]") {
  TempDir dir;
  const std::string f32 = dir.file("g32.h5"), f16 = dir.file("g16.h5");
  auto o = datasets::CellSpikeGenOptions().train(12).val(4).test(4).seed(3).chunk_rows(5);
  datasets::generate_cellspike(f32, o);
  datasets::generate_cellspike(f16, datasets::CellSpikeGenOptions(o).fp16(true));
  for (const char* split : {"train", "val", "test"}) {
    const auto info = datasets::inspect_cellspike(f32, split, 1600, 4, 15);
    CHECK(info.samples == (std::string(split) == "train" ? 12 : 4));
    CHECK(datasets::inspect_cellspike(f16, split, 1600, 4, 15).frames_dtype ==
          io::H5Dtype::float16);
  }
  io::H5File f(f32), h(f16);
  CHECK(f.read_string("meta.JSON").find("\"numPar\":15") != std::string::npos);
  const auto par = f.read_vector<float>("train_unitStar_par");
  const auto fr = f.read_vector<float>("train_frames");
  for (float p : par) {
    CHECK(p >= -1.0f);
    CHECK(p <= 1.0f);
  }
  // float16 files hold the float32 values rounded to half.
  const auto par16 = h.read_vector<uint16_t>("train_unitStar_par", io::H5Dtype::float16);
  const auto fr16 = h.read_vector<uint16_t>("train_frames", io::H5Dtype::float16);
  for (size_t i = 0; i < par.size(); ++i) CHECK(par16[i] == float_to_half_bits(par[i]));
  for (size_t i = 0; i < fr.size(); i += 97) CHECK(fr16[i] == float_to_half_bits(fr[i]));

  // Without noise, a frame is the simulation of its parameters, independently of the chunking.
  std::vector<float> sim(1600 * 4);
  datasets::simulate_cellspike(par.data() + 7 * 15, 1600, sim.data());
  double err = 0;
  for (size_t k = 0; k < sim.size(); ++k)
    err = std::max(err, std::abs(double(sim[k]) - double(fr[7 * 6400 + k])));
  CHECK(err < 0.2);  // only the recording noise (sd 0.02) differs
  CHECK(err > 0.0);

  // The neuron: at rest (V within 2 mV of -65, frame 0) before the first current step at 20 ms, and
  // firing action potentials (V above 0 mV, frame > 1.6) on the soma during the strongest step.
  const std::vector<float> mid(15, 0.0f);
  datasets::simulate_cellspike(mid.data(), 1600, sim.data());
  for (int64_t bin = 0; bin < 150; ++bin)
    CHECK(std::abs(sim[static_cast<size_t>(bin * 4)]) < 0.05f);
  int spikes = 0;
  for (int64_t bin = 1120 + 1; bin < 1440; ++bin)
    spikes +=
        sim[static_cast<size_t>(bin * 4)] > 1.6f && sim[static_cast<size_t>(bin * 4 - 4)] <= 1.6f;
  CHECK(spikes >= 3);
  // More sodium on the soma fires more: the parameters shape the traces.
  std::vector<float> strong(15, 0.0f), weak(15, 0.0f);
  strong[0] = 1.0f;
  weak[0] = -1.0f;
  std::vector<float> s1(1600 * 4), s2(1600 * 4);
  datasets::simulate_cellspike(strong.data(), 1600, s1.data());
  datasets::simulate_cellspike(weak.data(), 1600, s2.data());
  auto count = [](const std::vector<float>& s) {
    int n = 0;
    for (size_t bin = 1; bin < 1600; ++bin) n += s[bin * 4] > 1.6f && s[bin * 4 - 4] <= 1.6f;
    return n;
  };
  CHECK(count(s1) > count(s2));
}

TEST_CASE("cellSpike reader: truncated, corrupted and wrong-shaped files give clear errors",
          "[cellspike]") {
  TempDir dir;
  const std::string good = make_file(dir, "good.h5", 40);
  const auto size = fs::file_size(good);
  auto read_all = [](const std::string& path) {
    datasets::CellSpikeLoader l(
        path, datasets::CellSpikeLoaderOptions().micro_batch(4).block_rows(7).window_blocks(1));
    data::Example b;
    int64_t n = 0;
    while (l.next(b)) n += b.data.size(0);
    return n;
  };
  REQUIRE(read_all(good) == 40);

  // Truncated at 24 points over the whole file: every one an ipuml::Error naming the file.
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (int k = 0; k < 24; ++k) {
    const size_t len = static_cast<size_t>(size) * static_cast<size_t>(k) / 24;
    const std::string cut = dir.file("cut" + std::to_string(k) + ".h5");
    std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(len));
    INFO("truncated to " << len << " of " << size << " bytes");
    CHECK_THROWS_AS(read_all(cut), ipuml::Error);
    CHECK_THROWS_WITH(read_all(cut), Catch::Contains(cut));
  }
  // Bytes overwritten in the middle of the data: a clean error or plausible data, never a crash.
  for (int k = 1; k < 8; ++k) {
    std::string bad = bytes;
    const size_t at = bad.size() * static_cast<size_t>(k) / 8;
    for (size_t i = at; i < std::min(bad.size(), at + 64); ++i) bad[i] = static_cast<char>(0xA5);
    const std::string p = dir.file("bad" + std::to_string(k) + ".h5");
    std::ofstream(p, std::ios::binary).write(bad.data(), static_cast<std::streamsize>(bad.size()));
    try {
      read_all(p);
    } catch (const ipuml::Error&) {
    }
  }

  auto with = [&](const std::string& name, auto&& fill) {
    const std::string p = dir.file(name);
    io::H5File f(p, io::H5File::Mode::truncate);
    fill(f);
    return p;
  };
  const std::vector<float> z(40 * kT * kF, 0.0f);
  const std::string no_par = with("nopar.h5", [&](io::H5File& f) {
    f.write("train_frames", {40, kT, kF}, z);
  });
  CHECK_THROWS_WITH(read_all(no_par), Catch::Contains("no dataset 'train_unitStar_par'"));
  const std::string rank2 = with("rank2.h5", [&](io::H5File& f) {
    f.write("train_frames", {40, kT * kF}, z);
    f.write("train_unitStar_par", {40, kP}, std::vector<float>(40 * kP));
  });
  CHECK_THROWS_WITH(read_all(rank2), Catch::Contains("'train_frames' has shape [40, 32]") &&
                                         Catch::Contains("expected (samples, time bins, probes)"));
  const std::string count = with("count.h5", [&](io::H5File& f) {
    f.write("train_frames", {40, kT, kF}, z);
    f.write("train_unitStar_par", {39, kP}, std::vector<float>(39 * kP));
  });
  CHECK_THROWS_WITH(read_all(count),
                    Catch::Contains("has 40 samples but 'train_unitStar_par' has 39"));
  const std::string ints = with("ints.h5", [&](io::H5File& f) {
    f.write("train_frames", {40, kT, kF}, std::vector<int32_t>(z.size()));
    f.write("train_unitStar_par", {40, kP}, std::vector<float>(40 * kP));
  });
  CHECK_THROWS_WITH(read_all(ints),
                    Catch::Contains("is int32") && Catch::Contains("expected float32 or float16"));
  CHECK_THROWS_WITH(datasets::inspect_cellspike(good, "train", 1600, 4, 15),
                    Catch::Contains("has 8 time bins, expected 1600"));
  CHECK_THROWS_WITH(datasets::inspect_cellspike(good, "training"),
                    Catch::Contains("unknown split 'training'"));
  CHECK_THROWS_WITH(
      datasets::CellSpikeLoader(good, datasets::CellSpikeLoaderOptions().micro_batch(41)),
      Catch::Contains("fewer than one host batch"));
  CHECK_THROWS_WITH(datasets::CellSpikeLoader(
                        good, datasets::CellSpikeLoaderOptions().num_shards(2).first_shard(2)),
                    Catch::Contains("do not fit in 2 shares"));
  const std::string text = dir.file("text.h5");
  std::ofstream(text) << "not an HDF5 file\n";
  CHECK_THROWS_AS(read_all(text), ipuml::Error);
  CHECK_THROWS_AS(read_all(dir.file("missing.h5")), ipuml::Error);
}

TEST_CASE("cellSpike reader: shapes a file cannot hold are refused before any allocation",
          "[cellspike][hostile]") {
  TempDir dir;
  // Datasets created and never written read as fill values, so a 2 KB file can declare any shape:
  // (4, 2^40, 4) let std::bad_alloc escape, (4, 2^61, 4) wrapped the byte count and read
  // "batches", (4, 2^26, 4) allocated and read 4 GiB of zeros.
  auto declare = [&](const std::string& name, int64_t time_bins, int64_t params) {
    const std::string p = dir.file(name);
    io::H5File f(p, io::H5File::Mode::truncate);
    f.create_dataset("train_frames", io::H5Dtype::float32, {4, time_bins, 4});
    f.create_dataset("train_unitStar_par", io::H5Dtype::float32, {4, params});
    return p;
  };
  for (const auto& [name, time_bins, params] :
       {std::tuple<const char*, int64_t, int64_t>{"huge.h5", int64_t{1} << 40, 15},
        {"wrap.h5", int64_t{1} << 61, 15},
        {"zeros.h5", int64_t{1} << 26, 15},
        {"params.h5", 8, int64_t{1} << 62}}) {
    const std::string p = declare(name, time_bins, params);
    INFO(name);
    CHECK_THROWS_WITH(datasets::inspect_cellspike(p, "train"),
                      Catch::Contains(p) && Catch::Contains("expected at most 64x the file size"));
    CHECK_THROWS_AS(datasets::CellSpikeLoader(p, datasets::CellSpikeLoaderOptions().micro_batch(1)),
                    ipuml::Error);
  }
  CHECK_THROWS_WITH(datasets::inspect_cellspike(dir.file("wrap.h5"), "train"),
                    Catch::Contains("declare more than 2^63 bytes"));
  // A file whose declared data it can hold (written, or unwritten but small) still loads.
  const std::string small = declare("small.h5", 8, 3);
  CHECK(datasets::inspect_cellspike(small, "train").bytes_per_sample() == 8 * 4 * 4 + 3 * 4);
  CHECK(
      datasets::CellSpikeLoader(small, datasets::CellSpikeLoaderOptions().micro_batch(1)).size() ==
      4);
  // Inputs fuzzing kept (tests/fuzz/regressions/cellspike-*): an error, quickly, never a crash.
  const fs::path regressions = fs::path(IPUML_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
  for (const auto& e : fs::directory_iterator(regressions)) {
    if (e.path().filename().string().rfind("cellspike-", 0) != 0) continue;
    INFO(e.path().string());
    const auto t0 = std::chrono::steady_clock::now();
    try {
      datasets::CellSpikeLoader l(
          e.path().string(), datasets::CellSpikeLoaderOptions().micro_batch(1).max_samples(16));
      data::Example b;
      while (l.next(b)) {
      }
    } catch (const ipuml::Error&) {
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
}
