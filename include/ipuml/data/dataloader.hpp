// DataLoader: batches of a Dataset in sampler order, iterable with range-for, with the next
// `prefetch` batches assembled ahead of the consumer on oneTBB workers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/data/dataset.hpp>
#include <ipuml/data/example.hpp>
#include <ipuml/data/samplers.hpp>

namespace ipuml::data {

// Chaining setters, LibTorch style: DataLoaderOptions().batch_size(8).shuffle(true).seed(42).
class DataLoaderOptions {
 public:
  DataLoaderOptions() = default;
  explicit DataLoaderOptions(int64_t batch_size) : batch_size_(batch_size) {}

  DataLoaderOptions& batch_size(int64_t v) {
    batch_size_ = v;
    return *this;
  }
  DataLoaderOptions& shuffle(bool v) {
    shuffle_ = v;
    return *this;
  }
  DataLoaderOptions& seed(uint64_t v) {
    seed_ = v;
    return *this;
  }
  DataLoaderOptions& drop_last(bool v) {
    drop_last_ = v;
    return *this;
  }
  // Batches assembled ahead of the consumer; 0 assembles each batch when it is asked for.
  DataLoaderOptions& prefetch(int64_t v) {
    prefetch_ = v;
    return *this;
  }
  // Data parallelism: this loader serves replica `rank` of `replicas` (see ReplicaSampler).
  DataLoaderOptions& replicas(int64_t v) {
    replicas_ = v;
    return *this;
  }
  DataLoaderOptions& rank(int64_t v) {
    rank_ = v;
    return *this;
  }

  int64_t batch_size() const { return batch_size_; }
  bool shuffle() const { return shuffle_; }
  uint64_t seed() const { return seed_; }
  bool drop_last() const { return drop_last_; }
  int64_t prefetch() const { return prefetch_; }
  int64_t replicas() const { return replicas_; }
  int64_t rank() const { return rank_; }

 private:
  int64_t batch_size_ = 1;
  bool shuffle_ = false;
  uint64_t seed_ = 0;
  bool drop_last_ = false;
  int64_t prefetch_ = 2;
  int64_t replicas_ = 1;
  int64_t rank_ = 0;
};

namespace detail {

// Runs produce(0..count-1) ahead of take() in order, at most `depth` batches beyond the one
// taken. A batch nobody has started yet when it is wanted runs on the consumer's thread, so
// progress never depends on a free worker (one thread, or workers busy with the model's own
// parallel loops). A worker's exception is rethrown from take() as ipuml::Error. Destruction
// cancels what has not started and waits only for batches already being assembled.
class BatchPrefetcher {
 public:
  using Produce = std::function<Example(int64_t)>;
  BatchPrefetcher(int64_t count, int64_t depth, Produce produce);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  int64_t count() const;
  // The next batch in order; call at most count() times.
  Example take();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Stacks samples along a new leading dim with row copies (targets too, when present).
Example collate(const std::vector<Example>& samples);

}  // namespace detail

template <Dataset D>
class DataLoader {
  struct Run {
    std::unique_ptr<detail::BatchPrefetcher> batches;
    Example current;
    int64_t index = 0;  // of `current`; == count once exhausted
    int64_t count = 0;
  };

 public:
  struct Sentinel {};

  // A single-pass input iterator over one epoch; copies share the same epoch.
  class Iterator {
   public:
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    Iterator() = default;
    Example& operator*() const { return run_->current; }
    Example* operator->() const { return &run_->current; }
    Iterator& operator++() {
      if (++run_->index < run_->count)
        run_->current = run_->batches->take();
      else
        run_->batches.reset();  // epoch over: let the workers go now
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(Sentinel) const { return !run_ || run_->index >= run_->count; }
    // Batch number within the epoch.
    int64_t index() const { return run_ ? run_->index : 0; }

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<Run> run) : run_(std::move(run)) {}
    std::shared_ptr<Run> run_;
  };

  DataLoader(D dataset, DataLoaderOptions options = {})
      : dataset_(std::make_shared<const D>(std::move(dataset))), options_(options) {
    check_options();
    const int64_t n = static_cast<int64_t>(dataset_->size());
    if (options_.replicas() > 1 || options_.rank() != 0)
      sampler_ = std::make_shared<ReplicaSampler>(n, options_.replicas(), options_.rank(),
                                                  options_.seed(), options_.shuffle());
    else if (options_.shuffle())
      sampler_ = std::make_shared<RandomSampler>(n, options_.seed());
    else
      sampler_ = std::make_shared<SequentialSampler>(n);
  }
  // With a sampler of one's own (options' shuffle/seed/replicas are then not used).
  DataLoader(D dataset, std::shared_ptr<Sampler> sampler, DataLoaderOptions options)
      : dataset_(std::make_shared<const D>(std::move(dataset))),
        options_(options),
        sampler_(std::move(sampler)) {
    IPUML_CHECK(sampler_ != nullptr, "DataLoader: null sampler");
    check_options();
  }

  // Starts the next epoch (reshuffling) and returns its first batch's iterator.
  Iterator begin() {
    const uint64_t epoch = next_epoch_++;
    sampler_->set_epoch(epoch);
    auto indices = std::make_shared<const std::vector<int64_t>>(sampler_->indices());
    auto run = std::make_shared<Run>();
    run->count = batches_for(static_cast<int64_t>(indices->size()));
    if (run->count == 0) return Iterator(run);
    const int64_t bs = options_.batch_size();
    const int64_t total = static_cast<int64_t>(indices->size());
    run->batches = std::make_unique<detail::BatchPrefetcher>(
        run->count, options_.prefetch(), [ds = dataset_, indices, bs, total, epoch](int64_t b) {
          const int64_t first = b * bs;
          const std::span<const int64_t> sel(indices->data() + first,
                                             static_cast<size_t>(std::min(bs, total - first)));
          return assemble(*ds, sel, epoch);
        });
    run->current = run->batches->take();
    return Iterator(std::move(run));
  }
  Sentinel end() const { return {}; }

  // Batches per epoch.
  int64_t size() const { return batches_for(sampler_->size()); }
  // Samples visited per epoch (dataset size, or a replica's shard).
  int64_t num_samples() const { return sampler_->size(); }
  // The epoch the next begin() runs; set it when resuming so the shuffle continues as before.
  void set_epoch(uint64_t epoch) { next_epoch_ = epoch; }
  uint64_t epoch() const { return next_epoch_; }

  const D& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  Sampler& sampler() { return *sampler_; }

  // One batch of the given sample indices, assembled as the loader does (`epoch` reaches a
  // dataset whose samples depend on it: random augmentation).
  static Example assemble(const D& ds, std::span<const int64_t> sel, uint64_t epoch = 0) {
    const int64_t n = static_cast<int64_t>(ds.size());
    for (int64_t i : sel)
      IPUML_CHECK(i >= 0 && i < n, "DataLoader: sample index ", i,
                  " is out of range for a dataset of ", n, " samples");
    if constexpr (EpochDataset<D>) {
      std::vector<Example> samples;
      samples.reserve(sel.size());
      for (int64_t i : sel) samples.push_back(ds.get(i, epoch));
      return detail::collate(samples);
    } else if constexpr (BatchDataset<D>) {
      (void)epoch;
      return ds.get_batch(sel);
    } else {
      std::vector<Example> samples;
      samples.reserve(sel.size());
      (void)epoch;
      for (int64_t i : sel) samples.push_back(ds.get(i));
      return detail::collate(samples);
    }
  }

 private:
  void check_options() const {
    IPUML_CHECK(options_.batch_size() >= 1, "DataLoader: batch_size must be >= 1, got ",
                options_.batch_size());
    IPUML_CHECK(options_.prefetch() >= 0, "DataLoader: prefetch must be >= 0, got ",
                options_.prefetch());
    IPUML_CHECK(static_cast<int64_t>(dataset_->size()) > 0, "DataLoader: the dataset is empty");
  }
  int64_t batches_for(int64_t samples) const {
    const int64_t bs = options_.batch_size();
    return options_.drop_last() ? samples / bs : (samples + bs - 1) / bs;
  }

  std::shared_ptr<const D> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<Sampler> sampler_;
  uint64_t next_epoch_ = 0;
};

template <Dataset D>
DataLoader(D, DataLoaderOptions) -> DataLoader<D>;
template <Dataset D>
DataLoader(D) -> DataLoader<D>;

}  // namespace ipuml::data

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/data/dataloader_impl.hpp>
#endif
