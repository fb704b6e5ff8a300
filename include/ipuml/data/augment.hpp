// Random data augmentation that is reproducible: each sample's random numbers come from a
// counter-based stream keyed by (seed, epoch, sample index), so batches are bit-identical
// whatever the thread count or prefetch order. Random transforms, Compose, data::augment().
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ipuml/core/error.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/data/dataset.hpp>

namespace ipuml::data {

// The random numbers of one sample in one epoch: a Philox stream read 32 bits at a time. The
// stream depends on (seed, epoch, index) only, never on which thread asks or in what order.
class SampleRandom {
 public:
  SampleRandom(uint64_t seed, uint64_t epoch, int64_t index)
      // The stream number carries a tag so augmentation never reuses the streams of the ops a
      // program seeds with the same seed (those count up from 0).
      : stream_{seed, (uint64_t{0xA06u} << 52) ^ epoch},
        base_(static_cast<uint64_t>(index) << kBlockBits) {}

  uint32_t next_u32() {
    if (used_ == 4) {
      IPUML_CHECK(block_ + 1 < (uint64_t{1} << kBlockBits),
                  "SampleRandom: a sample drew more than 2^22 random words");
      words_ = stream_.words(base_ + block_++);
      used_ = 0;
    }
    return words_[used_++];
  }
  // Uniform in [0, 1), 53 random bits.
  double uniform() {
    const uint64_t hi = next_u32() >> 5, lo = next_u32() >> 6;  // 27 + 26 bits
    return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) *
           (1.0 / 9007199254740992.0);
  }
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  // Uniform integer in [low, high), high > low.
  int64_t integer(int64_t low, int64_t high) {
    IPUML_CHECK(high > low, "SampleRandom.integer: empty range [", low, ", ", high, ")");
    const uint64_t r = (static_cast<uint64_t>(next_u32()) << 32) | next_u32();
    return low + static_cast<int64_t>(r % static_cast<uint64_t>(high - low));
  }
  bool bernoulli(double p) { return uniform() < p; }

 private:
  static constexpr int kBlockBits = 22;
  RandomStream stream_;
  uint64_t base_;
  uint64_t block_ = 0;
  std::array<uint32_t, 4> words_{};
  int used_ = 4;
};

// A transform that draws random numbers: t(example, random) -> example.
template <typename T>
concept RandomTransform = std::copy_constructible<T> &&
    requires(const T& t, Example e, SampleRandom& r) {
  { t(std::move(e), r) } -> std::convertible_to<Example>;
};

namespace transforms {

// Applies its transforms in order; random ones draw from the sample's stream one after
// another, so adding a transform at the end never changes what the earlier ones draw.
template <typename... Ts>
requires((Transform<Ts> || RandomTransform<Ts>)&&...) class Compose {
 public:
  explicit Compose(Ts... ts) : ts_(std::move(ts)...) {}
  Example operator()(Example e, SampleRandom& r) const {
    std::apply([&](const auto&... t) { ((e = apply_one(t, std::move(e), r)), ...); }, ts_);
    return e;
  }
  const std::tuple<Ts...>& transforms() const { return ts_; }

 private:
  template <typename T>
  static Example apply_one(const T& t, Example e, SampleRandom& r) {
    if constexpr (RandomTransform<T>)
      return t(std::move(e), r);
    else
      return t(std::move(e));
  }
  std::tuple<Ts...> ts_;
};

}  // namespace transforms

// dataset with a random transform applied to each sample, drawing from SampleRandom(seed,
// epoch, index).
template <Dataset D, RandomTransform T>
class AugmentedDataset : public DatasetBase<AugmentedDataset<D, T>> {
 public:
  AugmentedDataset(D dataset, T transform, uint64_t seed)
      : dataset_(std::move(dataset)), transform_(std::move(transform)), seed_(seed) {}

  Example get(int64_t i, uint64_t epoch) const {
    this->check_index(i, size(), "AugmentedDataset::get");
    SampleRandom r(seed_, epoch, i);
    if constexpr (EpochDataset<D>)
      return transform_(dataset_.get(i, epoch), r);
    else
      return transform_(dataset_.get(i), r);
  }
  Example get(int64_t i) const { return get(i, 0); }
  int64_t size() const { return static_cast<int64_t>(dataset_.size()); }

  const D& dataset() const { return dataset_; }
  const T& transform() const { return transform_; }
  uint64_t seed() const { return seed_; }

 private:
  D dataset_;
  T transform_;
  uint64_t seed_;
};

// The dataset with `transform` drawing from SampleRandom(seed, epoch, index) for each sample.
template <Dataset D, RandomTransform T>
AugmentedDataset<D, T> augment(D dataset, T transform, uint64_t seed) {
  return AugmentedDataset<D, T>(std::move(dataset), std::move(transform), seed);
}

}  // namespace ipuml::data
