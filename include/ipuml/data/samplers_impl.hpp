// Bodies of the samplers (compiled once in src/lib/data_samplers.cpp).
#pragma once

#include <numeric>
#include <utility>

#include <ipuml/core/error.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/data/samplers.hpp>

namespace ipuml::data {

IPUML_INLINE std::vector<int64_t> shuffled_range(int64_t first, int64_t count, uint64_t seed,
                                                 uint64_t stream) {
  std::vector<int64_t> out(static_cast<size_t>(count));
  std::iota(out.begin(), out.end(), first);
  const RandomStream rs{seed, stream};
  for (int64_t i = count - 1; i > 0; --i) {
    const int64_t j = rs.integer(static_cast<uint64_t>(i), 0, i + 1);
    std::swap(out[static_cast<size_t>(i)], out[static_cast<size_t>(j)]);
  }
  return out;
}

namespace detail {
// Streams are keyed by (epoch, rank) so no two epochs or replicas share a permutation; the
// high tag keeps them apart from the streams the default generator hands to random ops.
inline uint64_t sampler_stream(uint64_t epoch, int64_t rank) {
  return (uint64_t{0x5A} << 56) ^ (epoch << 20) ^ static_cast<uint64_t>(rank);
}
}  // namespace detail

IPUML_INLINE SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  IPUML_CHECK(n >= 0, "SequentialSampler: negative sample count ", n);
}

IPUML_INLINE std::vector<int64_t> SequentialSampler::indices() const {
  std::vector<int64_t> out(static_cast<size_t>(n_));
  std::iota(out.begin(), out.end(), int64_t{0});
  return out;
}

IPUML_INLINE RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  IPUML_CHECK(n >= 0, "RandomSampler: negative sample count ", n);
}

IPUML_INLINE std::vector<int64_t> RandomSampler::indices() const {
  return shuffled_range(0, n_, seed_, detail::sampler_stream(epoch_, 0));
}

IPUML_INLINE ReplicaSampler::ReplicaSampler(int64_t n, int64_t replicas, int64_t rank,
                                            uint64_t seed, bool shuffle)
    : n_(n), replicas_(replicas), rank_(rank), shard_(0), seed_(seed), shuffle_(shuffle) {
  IPUML_CHECK(n >= 0, "ReplicaSampler: negative sample count ", n);
  IPUML_CHECK(replicas >= 1, "ReplicaSampler: replicas must be >= 1, got ", replicas);
  IPUML_CHECK(rank >= 0 && rank < replicas, "ReplicaSampler: rank ", rank, " is out of range for ",
              replicas, " replicas (expected 0..", replicas - 1, ")");
  shard_ = n / replicas;
}

IPUML_INLINE std::vector<int64_t> ReplicaSampler::indices() const {
  const int64_t first = rank_ * shard_;
  if (!shuffle_) {
    std::vector<int64_t> out(static_cast<size_t>(shard_));
    std::iota(out.begin(), out.end(), first);
    return out;
  }
  return shuffled_range(first, shard_, seed_, detail::sampler_stream(epoch_, rank_));
}

}  // namespace ipuml::data
