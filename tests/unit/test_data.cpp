// Tests of ipuml::data: the Dataset concept and .map(), Normalize, the samplers (seeded,
// replica shards), and the DataLoader (batching, prefetch, errors, no hangs) plus MnistDataset.
#include <ipuml/data/data.hpp>
#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/core/parallel.hpp>
#include <ipuml/tensor/ops.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>
#include "../support/mnist_cache.hpp"

using namespace ipuml;
using data::DataLoader;
using data::DataLoaderOptions;
using data::Example;

namespace {

// Sample i: data [2] = {i, 10*i} float32, target i int64. Optionally throws or sleeps at one index.
struct Toy : data::DatasetBase<Toy> {
  int64_t n = 10;
  int64_t throw_at = -1;
  int sleep_ms = 0;
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);

  Example get(int64_t i) const {
    check_index(i, n, "Toy::get");
    calls->fetch_add(1);
    if (i == throw_at) throw std::runtime_error("toy failure at " + std::to_string(i));
    if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    const float v = static_cast<float>(i);
    return {from_vector<float>({v, 10 * v}, {2}), from_vector<int64_t>({i}, {})};
  }
  int64_t size() const { return n; }
};
static_assert(data::Dataset<Toy>);
static_assert(!data::BatchDataset<Toy>);
static_assert(data::BatchDataset<datasets::MnistDataset>);
static_assert(data::BatchableTransform<data::transforms::Normalize<>>);

// A sampler that hands out whatever indices it was given.
struct FixedSampler : data::Sampler {
  std::vector<int64_t> idx;
  explicit FixedSampler(std::vector<int64_t> i) : idx(std::move(i)) {}
  int64_t size() const override { return static_cast<int64_t>(idx.size()); }
  std::vector<int64_t> indices() const override { return idx; }
};

std::vector<int64_t> targets_of(DataLoader<Toy>& loader) {
  std::vector<int64_t> out;
  for (auto& batch : loader)
    for (int64_t t : batch.target.to_vector<int64_t>()) out.push_back(t);
  return out;
}

datasets::MnistSplit synthetic_mnist(int64_t count) {
  datasets::MnistSplit s;
  s.count = count;
  s.rows = 28;
  s.cols = 28;
  s.images.resize(static_cast<size_t>(count * 28 * 28));
  s.labels.resize(static_cast<size_t>(count));
  for (size_t i = 0; i < s.images.size(); ++i)
    s.images[i] = static_cast<uint8_t>((i * 37 + i / 784) % 256);
  for (int64_t i = 0; i < count; ++i)
    s.labels[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 10);
  return s;
}

}  // namespace

TEST_CASE("data: map applies a transform per sample", "[data]") {
  auto ds = Toy{}.map([](Example e) {
    e.data = e.data * 2.0;
    return e;
  });
  static_assert(data::Dataset<decltype(ds)>);
  static_assert(!data::BatchDataset<decltype(ds)>);  // lambdas are not batchable
  CHECK(ds.size() == 10);
  CHECK(ds.get(3).data.to_vector<float>() == std::vector<float>{6, 60});
  CHECK(ds.get(3).target.item<int64_t>() == 3);
  CHECK_THROWS_WITH(ds.get(10), Catch::Contains("index 10 is out of range"));
  CHECK_THROWS_AS(ds.get(-1), Error);
}

TEST_CASE("data: Normalize per element and per channel, on samples and batches", "[data]") {
  data::transforms::Normalize one(0.5, 0.25);
  Tensor x = from_vector<float>({0.0f, 0.5f, 1.0f}, {3});
  CHECK(one.apply(x).to_vector<float>() == std::vector<float>{-2.0f, 0.0f, 2.0f});

  data::transforms::Normalize rgb({0.0, 1.0}, {1.0, 2.0});
  Tensor img = from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});  // [C=2,H=2,W=2]
  CHECK(rgb.apply(img).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 2, 2.5, 3, 3.5});
  Tensor batch = stack({img, img}, 0);  // [B,C,H,W]: same answer per sample
  auto b = rgb.apply(batch).to_vector<float>();
  CHECK(std::vector<float>(b.begin(), b.begin() + 8) ==
        std::vector<float>{1, 2, 3, 4, 2, 2.5, 3, 3.5});
  CHECK(std::vector<float>(b.begin() + 8, b.end()) ==
        std::vector<float>{1, 2, 3, 4, 2, 2.5, 3, 3.5});

  CHECK_THROWS_WITH(data::transforms::Normalize(0.1, 0.0), Catch::Contains("non-zero std"));
  CHECK_THROWS_AS(data::transforms::Normalize({0.1, 0.2}, {1.0}), Error);
  CHECK_THROWS_WITH(rgb.apply(from_vector<float>({1, 2, 3}, {3, 1, 1})),
                    Catch::Contains("2 channel means"));
  CHECK_THROWS_WITH(one.apply(from_vector<int64_t>({1}, {1})), Catch::Contains("float32"));
}

TEST_CASE("data: samplers are seeded permutations, reshuffled per epoch", "[data]") {
  data::SequentialSampler seq(5);
  CHECK(seq.indices() == std::vector<int64_t>{0, 1, 2, 3, 4});

  data::RandomSampler r(100, 7);
  auto e0 = r.indices();
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(100);
  std::iota(all.begin(), all.end(), 0);
  CHECK(sorted == all);
  CHECK(e0 != all);
  CHECK(data::RandomSampler(100, 7).indices() == e0);  // same seed and epoch -> same order
  CHECK(data::RandomSampler(100, 8).indices() != e0);
  r.set_epoch(1);
  CHECK(r.indices() != e0);
  r.set_epoch(0);
  CHECK(r.indices() == e0);
  CHECK(data::RandomSampler(0, 1).indices().empty());
  CHECK_THROWS_AS(data::RandomSampler(-1, 0), Error);
}

TEST_CASE("data: ReplicaSampler gives disjoint shards shuffled only within", "[data]") {
  const int64_t n = 103, replicas = 4;
  std::set<int64_t> seen;
  for (int64_t rank = 0; rank < replicas; ++rank) {
    data::ReplicaSampler s(n, replicas, rank, 42, true);
    CHECK(s.size() == 25);  // 103 / 4; the 3 leftovers are dropped
    auto idx = s.indices();
    REQUIRE(idx.size() == 25);
    for (int64_t i : idx) {
      CHECK(i >= rank * 25);  // the replica's own contiguous shard
      CHECK(i < (rank + 1) * 25);
      CHECK(seen.insert(i).second);  // disjoint from every other replica
    }
    auto sorted = idx;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted != idx);  // shuffled
    s.set_epoch(1);
    auto next = s.indices();
    CHECK(next != idx);  // reshuffled per epoch, within the same shard
    std::sort(next.begin(), next.end());
    CHECK(next == sorted);
    CHECK(data::ReplicaSampler(n, replicas, rank, 42, true).indices() ==
          idx);  // ranks agree on seed
  }
  CHECK(seen.size() == 100);

  data::ReplicaSampler plain(10, 2, 1, 0, false);
  CHECK(plain.indices() == std::vector<int64_t>{5, 6, 7, 8, 9});
  CHECK_THROWS_WITH(data::ReplicaSampler(10, 2, 2), Catch::Contains("rank 2 is out of range"));
  CHECK_THROWS_AS(data::ReplicaSampler(10, 0, 0), Error);
}

TEST_CASE("data: DataLoader batches, last partial batch, drop_last", "[data]") {
  DataLoader loader(Toy{}, DataLoaderOptions().batch_size(4));
  CHECK(loader.size() == 3);
  std::vector<int64_t> sizes;
  for (auto& batch : loader) {
    CHECK(batch.data.shape() == Shape{batch.target.size(0), 2});
    CHECK(batch.target.dtype() == kInt64);
    sizes.push_back(batch.target.size(0));
  }
  CHECK(sizes == std::vector<int64_t>{4, 4, 2});
  CHECK(targets_of(loader) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  DataLoader dropping(Toy{}, DataLoaderOptions().batch_size(4).drop_last(true));
  CHECK(dropping.size() == 2);
  CHECK(targets_of(dropping).size() == 8);

  // The first batch's values, stacked by collate.
  auto it = loader.begin();
  CHECK(it->data.to_vector<float>() == std::vector<float>{0, 0, 1, 10, 2, 20, 3, 30});
}

TEST_CASE("data: DataLoader shuffle is seeded, per epoch, and independent of prefetch and threads",
          "[data]") {
  auto order = [](uint64_t seed, int64_t prefetch, int threads, int epochs) {
    set_num_threads(threads);
    Toy toy;
    toy.n = 57;
    DataLoader loader(
        toy, DataLoaderOptions().batch_size(5).shuffle(true).seed(seed).prefetch(prefetch));
    std::vector<std::vector<int64_t>> out;
    for (int e = 0; e < epochs; ++e) out.push_back(targets_of(loader));
    set_num_threads(0);
    return out;
  };
  const auto ref = order(3, 0, 1, 2);
  REQUIRE(ref.size() == 2);
  auto sorted = ref[0];
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(57);
  std::iota(all.begin(), all.end(), 0);
  CHECK(sorted == all);     // every sample once
  CHECK(ref[0] != all);     // shuffled
  CHECK(ref[0] != ref[1]);  // reshuffled the next epoch
  CHECK(order(3, 4, 2, 2) == ref);
  CHECK(order(3, 1, 1, 2) == ref);
  CHECK(order(3, 8, 2, 2) == ref);
  CHECK(order(4, 2, 2, 1)[0] != ref[0]);

  // set_epoch replays an epoch (resuming).
  Toy toy;
  toy.n = 57;
  DataLoader loader(toy, DataLoaderOptions().batch_size(5).shuffle(true).seed(3));
  loader.set_epoch(1);
  CHECK(targets_of(loader) == ref[1]);
  CHECK(loader.epoch() == 2);
}

TEST_CASE("data: DataLoader over replicas splits the samples", "[data]") {
  std::set<int64_t> seen;
  for (int64_t rank = 0; rank < 3; ++rank) {
    DataLoader loader(Toy{},
                      DataLoaderOptions().batch_size(2).shuffle(true).replicas(3).rank(rank));
    CHECK(loader.num_samples() == 3);
    for (int64_t t : targets_of(loader)) CHECK(seen.insert(t).second);
  }
  CHECK(seen.size() == 9);
}

TEST_CASE("data: DataLoader errors", "[data]") {
  CHECK_THROWS_WITH(DataLoader(Toy{}, DataLoaderOptions().batch_size(0)),
                    Catch::Contains("batch_size must be >= 1"));
  CHECK_THROWS_AS(DataLoader(Toy{}, DataLoaderOptions().prefetch(-1)), Error);
  Toy empty_toy;
  empty_toy.n = 0;
  CHECK_THROWS_WITH(DataLoader(empty_toy, DataLoaderOptions()),
                    Catch::Contains("dataset is empty"));

  for (int64_t prefetch : {0, 3}) {
    DataLoader bad(Toy{}, std::make_shared<FixedSampler>(std::vector<int64_t>{0, 1, 2, 3, 10}),
                   DataLoaderOptions().batch_size(2).prefetch(prefetch));
    CHECK_THROWS_WITH(targets_of(bad), Catch::Contains("sample index 10 is out of range"));
  }
  datasets::MnistDataset mnist(synthetic_mnist(4));
  CHECK_THROWS_WITH(mnist.get(4), Catch::Contains("out of range"));
}

TEST_CASE("data: a worker's exception surfaces in the consumer, never a hang", "[data]") {
  for (int threads : {1, 2}) {
    for (int64_t prefetch : {0, 1, 4}) {
      INFO("threads " << threads << " prefetch " << prefetch);
      set_num_threads(threads);
      Toy toy;
      toy.n = 40;
      toy.throw_at = 13;
      DataLoader loader(toy, DataLoaderOptions().batch_size(2).prefetch(prefetch));
      int64_t batches = 0;
      try {
        for (auto& batch : loader) {
          (void)batch;
          ++batches;
        }
        FAIL("no exception");
      } catch (const Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("batch 6") && Catch::Contains("toy failure at 13"));
      }
      CHECK(batches == 6);  // batches 0..5 arrived intact before the failing one
      set_num_threads(0);
    }
  }
}

TEST_CASE("data: destroying a loader or its iterator mid-epoch does not hang", "[data]") {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Toy toy;
    toy.n = 200;
    toy.sleep_ms = 2;
    const auto start = std::chrono::steady_clock::now();
    {
      DataLoader loader(toy, DataLoaderOptions().batch_size(2).prefetch(8));
      int64_t seen = 0;
      for (auto& batch : loader) {
        (void)batch;
        if (++seen == 3) break;
      }
      auto it = loader.begin();  // a second epoch, abandoned after one batch with the loader
      CHECK(it.index() == 0);
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(secs < 5.0);
    // Only the batches consumed or in flight were assembled, not the whole epoch.
    CHECK(toy.calls->load() < 2 * (3 + 1 + 2 * 9));
    set_num_threads(0);
  }
}

TEST_CASE("data: MnistDataset gives [1,28,28] floats in [0,1], batches by row copies",
          "[data][mnist]") {
  datasets::MnistDataset ds(synthetic_mnist(30));
  CHECK(ds.size() == 30);
  Example e = ds.get(7);
  CHECK(e.data.shape() == Shape{1, 28, 28});
  CHECK(e.data.dtype() == kFloat32);
  CHECK(e.target.dtype() == kInt64);
  CHECK(e.target.item<int64_t>() == 7);
  auto px = e.data.to_vector<float>();
  CHECK(px[5] == static_cast<float>(ds.split().images[7 * 784 + 5]) / 255.0f);
  CHECK(*std::max_element(px.begin(), px.end()) <= 1.0f);

  // The fast path gives exactly what stacking samples gives, normalised or not.
  auto norm = datasets::MnistDataset(synthetic_mnist(30))
                  .map(data::transforms::Normalize(datasets::kMnistMean, datasets::kMnistStd));
  static_assert(data::BatchDataset<decltype(norm)>);
  const std::vector<int64_t> idx{3, 29, 0, 11};
  Example fast = norm.get_batch(idx);
  std::vector<Example> samples;
  for (int64_t i : idx) samples.push_back(norm.get(i));
  Example slow = data::detail::collate(samples);
  CHECK(fast.data.shape() == Shape{4, 1, 28, 28});
  CHECK(fast.target.shape() == Shape{4});
  CHECK(fast.data.to_vector<float>() == slow.data.to_vector<float>());
  CHECK(fast.target.to_vector<int64_t>() == std::vector<int64_t>{3, 9, 0, 1});

  DataLoader loader(norm, DataLoaderOptions().batch_size(8).shuffle(true).seed(1));
  int64_t n = 0;
  for (auto& batch : loader) n += batch.data.size(0);
  CHECK(n == 30);
}

TEST_CASE("data: MNIST from the data cache, normalised", "[data][mnist]") {
  const std::string dir = ipuml::testing::cached_mnist_dir();
  if (dir.empty()) return;
  auto test = datasets::normalized_mnist(dir, false);
  CHECK(test.size() == 10000);
  DataLoader loader(test, DataLoaderOptions().batch_size(1000));
  double sum = 0, sq = 0;
  int64_t count = 0;
  for (auto& batch : loader)
    for (float v : batch.data.to_vector<float>()) {
      sum += v;
      sq += double(v) * v;
      ++count;
    }
  const double mean = sum / double(count);
  CHECK(std::abs(mean) < 0.05);
  CHECK(std::abs(std::sqrt(sq / double(count) - mean * mean) - 1.0) < 0.05);
}
