// The Dataset concept (get(i), size()), the CRTP base that adds .map(transform), and the
// optional batch hook get_batch(indices) a dataset offers when it can assemble batches fast.
// size() returns a count (anything convertible to int64_t); a mapped dataset returns a
// DatasetSize, which is also what LibTorch's optional<size_t> is to ported code.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include <ipuml/core/error.hpp>
#include <ipuml/data/example.hpp>

namespace ipuml::data {

// A dataset's sample count, read both ways: as an int64_t (it converts implicitly, so
// `int64_t n = ds.size()` and `ds.size() == 10000` compile), and as LibTorch's
// std::optional<size_t> (`ds.size().value()`, has_value()), which ported code reads. ipuml's
// datasets always know their size, so it always has a value.
class DatasetSize {
 public:
  constexpr DatasetSize(int64_t n) : n_(n) {}  // NOLINT: implicit, it is the count
  constexpr operator int64_t() const { return n_; }
  constexpr bool has_value() const { return true; }
  constexpr size_t value() const { return static_cast<size_t>(n_); }
  constexpr size_t operator*() const { return value(); }

 private:
  int64_t n_;
};

// Random access to samples. get() must be callable from several threads at once (the loader
// assembles batches ahead of the consumer on oneTBB workers).
template <typename D>
concept Dataset = requires(const D& d, int64_t i) {
  { d.get(i) } -> std::convertible_to<Example>;
  { d.size() } -> std::convertible_to<int64_t>;
};

// A dataset that assembles a whole batch itself (e.g. with row memcpy) instead of the loader
// stacking get(i) one sample at a time. The result has a leading batch dimension.
template <typename D>
concept BatchDataset = Dataset<D> && requires(const D& d, std::span<const int64_t> idx) {
  { d.get_batch(idx) } -> std::convertible_to<Example>;
};

// A dataset whose samples differ by epoch (random augmentation, data/augment.hpp):
// get(i, epoch). The DataLoader passes each epoch's number; get(i) is epoch 0.
template <typename D>
concept EpochDataset = Dataset<D> && requires(const D& d, int64_t i, uint64_t epoch) {
  { d.get(i, epoch) } -> std::convertible_to<Example>;
};

// A transform maps an Example to an Example. One that declares `batchable = true` gives the same
// result applied to a stacked batch as to each sample (elementwise, e.g. Normalize), so it
// keeps a BatchDataset's fast path.
template <typename T>
concept Transform = std::copy_constructible<T> && requires(const T& t, Example e) {
  { t(std::move(e)) } -> std::convertible_to<Example>;
};
template <typename T>
concept BatchableTransform = Transform<T> && requires {
  requires T::batchable;
};

template <Dataset D, Transform T>
class MapDataset;

// The CRTP base: `class MyData : public DatasetBase<MyData> { Example get(int64_t) const;
// int64_t size() const; };` then `MyData(...).map(Normalize(0.5, 0.5))`.
template <typename Self>
class DatasetBase {
 public:
  template <Transform T>
  auto map(T transform) const& {
    return MapDataset<Self, T>(static_cast<const Self&>(*this), std::move(transform));
  }
  template <Transform T>
  auto map(T transform) && {
    return MapDataset<Self, T>(std::move(static_cast<Self&>(*this)), std::move(transform));
  }

 protected:
  // Index validation every dataset shares so the message is the same everywhere.
  static void check_index(int64_t i, int64_t n, const char* who) {
    IPUML_CHECK(i >= 0 && i < n, who, ": index ", i, " is out of range for a dataset of ", n,
                " samples");
  }
};

// A dataset with a transform applied to each sample it returns (and to each batch, when the
// transform is batchable and the inner dataset assembles batches).
template <Dataset D, Transform T>
class MapDataset : public DatasetBase<MapDataset<D, T>> {
 public:
  MapDataset(D dataset, T transform)
      : dataset_(std::move(dataset)), transform_(std::move(transform)) {}

  Example get(int64_t i) const { return transform_(dataset_.get(i)); }
  Example get(int64_t i, uint64_t epoch) const requires EpochDataset<D> {
    return transform_(dataset_.get(i, epoch));
  }
  DatasetSize size() const { return static_cast<int64_t>(dataset_.size()); }

  Example get_batch(std::span<const int64_t> indices) const requires BatchDataset<D> &&
      BatchableTransform<T> {
    return transform_(dataset_.get_batch(indices));
  }

  const D& dataset() const { return dataset_; }
  const T& transform() const { return transform_; }

 private:
  D dataset_;
  T transform_;
};

}  // namespace ipuml::data
