// Samplers: the order in which a DataLoader visits sample indices each epoch. Sequential,
// seeded random, and ReplicaSampler (each data-parallel replica a disjoint shard, shuffled within).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ipuml/core/config.hpp>

namespace ipuml::data {

// An epoch's index order. Shuffles are a pure function of (seed, epoch), drawn from the
// counter-based generator, so they match across thread counts, processes and resumed runs.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // Indices visited per epoch.
  virtual int64_t size() const = 0;
  // The order for the current epoch.
  virtual std::vector<int64_t> indices() const = 0;
  // Selects the epoch whose order indices() returns (the DataLoader sets it before each pass).
  virtual void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }

 protected:
  uint64_t epoch_ = 0;
};

class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  int64_t size() const override { return n_; }
  std::vector<int64_t> indices() const override;

 private:
  int64_t n_;
};

// A fresh permutation of 0..n-1 every epoch.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t n, uint64_t seed = 0);
  int64_t size() const override { return n_; }
  std::vector<int64_t> indices() const override;

 private:
  int64_t n_;
  uint64_t seed_;
};

// Data parallelism over `replicas` replicas (or poprun instances): replica `rank` owns the
// contiguous shard [rank*m, (rank+1)*m) with m = n / replicas, so shards are disjoint and the
// n % replicas leftover samples are dropped (every replica runs the same number of steps).
// With `shuffle` the shard is permuted anew each epoch, only within itself; every rank must
// use the same seed.
class ReplicaSampler : public Sampler {
 public:
  ReplicaSampler(int64_t n, int64_t replicas, int64_t rank, uint64_t seed = 0, bool shuffle = true);
  int64_t size() const override { return shard_; }
  std::vector<int64_t> indices() const override;
  int64_t replicas() const { return replicas_; }
  int64_t rank() const { return rank_; }
  int64_t dataset_size() const { return n_; }  // samples over all ranks

 private:
  int64_t n_, replicas_, rank_, shard_;
  uint64_t seed_;
  bool shuffle_;
};

// The permutation of [first, first+count) a shuffled epoch visits: Fisher-Yates with one
// counter-based draw per position from the stream (seed, stream).
std::vector<int64_t> shuffled_range(int64_t first, int64_t count, uint64_t seed, uint64_t stream);

}  // namespace ipuml::data

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/data/samplers_impl.hpp>
#endif
