// The Neuron-Inverter's cellSpike HDF5 files: {train,val,test}_frames (N, 1600, 4) voltage traces
// and {train,val,test}_unitStar_par (N, 15) targets, float32 or float16, streamed by hyperslab.
#pragma once

#include <ipuml/core/config.hpp>

#if IPUML_WITH_HDF5

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ipuml/data/example.hpp>
#include <ipuml/io/hdf5.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::datasets {

// One split of a cellSpike file as found on disk, checked for consistency.
struct CellSpikeSplitInfo {
  std::string path, split;                          // file and "train" / "val" / "test"
  int64_t samples = 0;                              // N
  int64_t time_bins = 0;                            // 1600
  int64_t features = 0;                             // 4 probes
  int64_t params = 0;                               // 15
  io::H5Dtype frames_dtype = io::H5Dtype::float32;  // float32 or float16
  io::H5Dtype params_dtype = io::H5Dtype::float32;
  int64_t bytes_per_sample() const;  // on disk, frames + params
};

// Opens `path` and checks that `<split>_frames` is (N, T, F) and `<split>_unitStar_par` is (N, P),
// both float32 or float16, with the same N; throws ipuml::Error naming what is wrong otherwise.
// `expect_*` > 0 also pins T, F and P (the meta yaml's numTimeBin, numFeature, numPar).
CellSpikeSplitInfo inspect_cellspike(const std::string& path, const std::string& split,
                                     int64_t expect_time_bins = 0, int64_t expect_features = 0,
                                     int64_t expect_params = 0);

// How a CellSpikeLoader cuts a split into replicas' shares and host batches.
struct CellSpikeLoaderOptions {
  IPUML_ARG(std::string, split) = "train";
  IPUML_ARG(int64_t, micro_batch) = 16;
  // Micro-batches each replica contributes to one host batch (device iterations x gradient
  // accumulation).
  IPUML_ARG(int64_t, steps_per_batch) = 1;
  // Data parallelism: the split is cut into `num_shards` contiguous, equal shares (one per
  // replica over all instances; the leftover rows are dropped) and this loader feeds the
  // `local_shards` shares from `first_shard` on, i.e. this instance's local replicas.
  IPUML_ARG(int64_t, num_shards) = 1;
  IPUML_ARG(int64_t, first_shard) = 0;
  IPUML_ARG(int64_t, local_shards) = 1;
  // Samples of the split used at all (0: every one), taken from its start before sharding, as the
  // original's max_glob_samples_per_epoch.
  IPUML_ARG(int64_t, max_samples) = 0;
  // Shuffle within each share: the order of its blocks, and the samples within each window of
  // `window_blocks` blocks (a window covering the share is a full shuffle of the share).
  IPUML_ARG(bool, shuffle) = true;
  IPUML_ARG(uint64_t, seed) = 0;
  // Rows per hyperslab read, and blocks shuffled together. Memory: each share holds its window
  // and, with prefetch, the next one being read on a oneTBB worker.
  IPUML_ARG(int64_t, block_rows) = 1024;
  IPUML_ARG(int64_t, window_blocks) = 16;
  IPUML_ARG(bool, prefetch) = true;
};

// What a loader read so far (all epochs): bytes from disk, and the seconds spent reading them
// (on workers or on the consumer's thread).
struct CellSpikeReadStats {
  int64_t bytes = 0;
  int64_t rows = 0;
  double read_seconds = 0;
  double megabytes_per_second() const { return read_seconds > 0 ? bytes / read_seconds / 1e6 : 0; }
};

// Streams host batches of one split: frames [rows, T, F] and targets [rows, P], float32, with
// rows = steps_per_batch x local_shards x micro_batch laid out [step][local replica][micro]
// (trainingModel's layout), each replica's micro-batches drawn from its own share only. The file
// never has to fit in memory. Order is a pure function of (seed, epoch, global share), so a
// replica gets the same samples whichever process feeds it.
class CellSpikeLoader {
 public:
  CellSpikeLoader(const std::string& path, CellSpikeLoaderOptions options);
  ~CellSpikeLoader();
  CellSpikeLoader(CellSpikeLoader&&) noexcept;
  CellSpikeLoader& operator=(CellSpikeLoader&&) noexcept;

  const CellSpikeSplitInfo& info() const;
  const CellSpikeLoaderOptions& options() const;
  int64_t shard_size() const;  // samples in each share
  int64_t size() const;        // host batches per epoch
  int64_t batch_rows() const;  // rows of a host batch
  // Starts epoch `epoch` (its shuffle); next() then returns size() batches and then false.
  void start_epoch(uint64_t epoch);
  bool next(data::Example& out);
  CellSpikeReadStats stats() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The meta yaml the original keeps beside each file (numFeature, numTimeBin, numPar,
// featureName, parName); ipuml-cellspike-gen writes it, the example reads it with yaml-cpp.
struct CellSpikeMeta {
  int64_t num_features = 4;
  int64_t num_time_bins = 1600;
  int64_t num_par = 15;
  std::vector<std::string> feature_names;
  std::vector<std::string> par_names;
};
std::string cellspike_meta_yaml(const CellSpikeMeta& meta);

// The original's file names in a data directory: <cell>_excite.cellSpike_4prB8kHz.data.h5 and,
// beside it, <cell>_excite.cellSpike_4prB8kHz.meta.yaml.
inline std::string cellspike_data_file(const std::string& cell) {
  return cell + "_excite.cellSpike_4prB8kHz.data.h5";
}
inline std::string cellspike_meta_file(const std::string& cell) {
  return cell + "_excite.cellSpike_4prB8kHz.meta.yaml";
}

}  // namespace ipuml::datasets

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/cellspike_impl.hpp>
#endif

#endif  // IPUML_WITH_HDF5
