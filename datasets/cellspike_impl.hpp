// Bodies of the cellSpike reader (compiled once in src/lib/datasets_cellspike.cpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <utility>

#include <ipuml/core/dtype.hpp>
#include <ipuml/data/samplers.hpp>
#include <ipuml/datasets/cellspike.hpp>
#include <ipuml/io/isolated.hpp>
#include <ipuml/tensor/dispatch.hpp>

#include <tbb/task_group.h>

namespace ipuml::datasets {

namespace detail {

inline const char* kCellSpikeSplits[] = {"train", "val", "test"};

inline std::string frames_name(const std::string& split) { return split + "_frames"; }
inline std::string params_name(const std::string& split) { return split + "_unitStar_par"; }

inline size_t cellspike_element_bytes(io::H5Dtype t) { return t == io::H5Dtype::float16 ? 2 : 4; }

// Reads rows [first, first+count) of a float32 or float16 dataset as float32 into `out`.
inline void read_rows_as_float(const io::H5File& f, const std::string& name, io::H5Dtype dtype,
                               int64_t first, int64_t count, int64_t row_elems, float* out,
                               std::vector<uint16_t>& scratch) {
  if (dtype == io::H5Dtype::float32) {
    f.read_rows(name, dtype, first, count, out);
    return;
  }
  const size_t n = static_cast<size_t>(count * row_elems);
  scratch.resize(n);
  f.read_rows(name, dtype, first, count, scratch.data());
  for (size_t i = 0; i < n; ++i) out[i] = half_bits_to_float(scratch[i]);
}

// The shuffle stream of (epoch, global share, window); window 0xffffff is the block order.
inline uint64_t cellspike_stream(uint64_t epoch, int64_t shard, int64_t window) {
  return (uint64_t{0xCE} << 56) ^ (epoch << 40) ^ (static_cast<uint64_t>(shard) << 24) ^
         static_cast<uint64_t>(window);
}

}  // namespace detail

IPUML_INLINE int64_t CellSpikeSplitInfo::bytes_per_sample() const {
  return time_bins * features *
             static_cast<int64_t>(detail::cellspike_element_bytes(frames_dtype)) +
         params * static_cast<int64_t>(detail::cellspike_element_bytes(params_dtype));
}

namespace detail {

// inspect_cellspike's checks, in this process.
inline CellSpikeSplitInfo inspect_cellspike_here(const std::string& path, const std::string& split,
                                                 int64_t expect_time_bins, int64_t expect_features,
                                                 int64_t expect_params) {
  IPUML_CHECK(std::find(std::begin(detail::kCellSpikeSplits), std::end(detail::kCellSpikeSplits),
                        split) != std::end(detail::kCellSpikeSplits),
              "cellSpike: unknown split '", split, "' (expected train, val or test)");
  io::H5File f(path);
  const std::string fn = detail::frames_name(split), pn = detail::params_name(split);
  for (const std::string& name : {fn, pn})
    IPUML_CHECK(f.is_dataset(name), "cellSpike ", path, ": no dataset '", name,
                "' (a cellSpike file holds {train,val,test}_frames and "
                "{train,val,test}_unitStar_par)");
  const io::H5DatasetInfo fr = f.info(fn), pa = f.info(pn);
  auto is_float = [](io::H5Dtype t) {
    return t == io::H5Dtype::float32 || t == io::H5Dtype::float16;
  };
  IPUML_CHECK(is_float(fr.dtype) && is_float(pa.dtype), "cellSpike ", path, ": '", fn, "' is ",
              fr.type_name, " and '", pn, "' is ", pa.type_name, ", expected float32 or float16");
  IPUML_CHECK(fr.shape.size() == 3 && fr.shape[1] > 0 && fr.shape[2] > 0, "cellSpike ", path, ": '",
              fn, "' has shape ", fr.shape, ", expected (samples, time bins, probes)");
  IPUML_CHECK(pa.shape.size() == 2 && pa.shape[1] > 0, "cellSpike ", path, ": '", pn,
              "' has shape ", pa.shape, ", expected (samples, parameters)");
  IPUML_CHECK(fr.shape[0] == pa.shape[0], "cellSpike ", path, ": '", fn, "' has ", fr.shape[0],
              " samples but '", pn, "' has ", pa.shape[0], ", expected the same number");
  IPUML_CHECK(expect_time_bins <= 0 || fr.shape[1] == expect_time_bins, "cellSpike ", path, ": '",
              fn, "' has ", fr.shape[1], " time bins, expected ", expect_time_bins);
  IPUML_CHECK(expect_features <= 0 || fr.shape[2] == expect_features, "cellSpike ", path, ": '", fn,
              "' has ", fr.shape[2], " probes, expected ", expect_features);
  IPUML_CHECK(expect_params <= 0 || pa.shape[1] == expect_params, "cellSpike ", path, ": '", pn,
              "' has ", pa.shape[1], " parameters, expected ", expect_params);
  // A sample's bytes and the split's, overflow-checked and bounded by what the file can hold
  // (64x its size, allowing for compression), before any buffer is sized from the shapes: a
  // dataset whose storage was never written reads as fill values, so a 2 KB file can declare
  // (4, 2^61, 4) frames (whose byte count wraps) or (4, 2^26, 4) (4 GiB of zeros).
  const int64_t fbytes = static_cast<int64_t>(detail::cellspike_element_bytes(fr.dtype));
  const int64_t pbytes = static_cast<int64_t>(detail::cellspike_element_bytes(pa.dtype));
  int64_t frame_bytes = 0, par_bytes = 0, sample_bytes = 0, split_bytes = 0;
  const bool overflow = __builtin_mul_overflow(fr.shape[1], fr.shape[2], &frame_bytes) ||
                        __builtin_mul_overflow(frame_bytes, fbytes, &frame_bytes) ||
                        __builtin_mul_overflow(pa.shape[1], pbytes, &par_bytes) ||
                        __builtin_add_overflow(frame_bytes, par_bytes, &sample_bytes) ||
                        __builtin_mul_overflow(sample_bytes, fr.shape[0], &split_bytes);
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(path, ec);
  const int64_t budget =
      ec ? 0 : static_cast<int64_t>(std::min<uintmax_t>(file_bytes, uintmax_t{1} << 56)) * 64;
  IPUML_CHECK(!overflow && split_bytes <= budget, "cellSpike ", path, ": '", fn, "' ", fr.shape,
              " and '", pn, "' ", pa.shape, " declare ",
              overflow ? std::string("more than 2^63") : std::to_string(split_bytes),
              " bytes, more than a file of ", ec ? 0 : file_bytes,
              " bytes can hold (expected at most 64x the file size)");
  CellSpikeSplitInfo info;
  info.path = path;
  info.split = split;
  info.samples = fr.shape[0];
  info.time_bins = fr.shape[1];
  info.features = fr.shape[2];
  info.params = pa.shape[1];
  info.frames_dtype = fr.dtype;
  info.params_dtype = pa.dtype;
  return info;
}

}  // namespace detail

IPUML_INLINE CellSpikeSplitInfo inspect_cellspike(const std::string& path, const std::string& split,
                                                  int64_t expect_time_bins, int64_t expect_features,
                                                  int64_t expect_params) {
  // A cellSpike file comes from other tools, with no integrity record, and libhdf5 1.10 turns
  // some malformed files into crashes or endless loops. The first look at one (its metadata and
  // its first and last samples) happens in a child process, so such a file is an error here.
  io::run_isolated(ipuml::detail::str("cellSpike ", path), [&] {
    const CellSpikeSplitInfo info = detail::inspect_cellspike_here(path, split, expect_time_bins,
                                                                   expect_features, expect_params);
    if (info.samples == 0) return;  // (the shapes' bytes are bounded only when samples > 0)
    const io::H5File f(path);
    std::vector<float> frames(static_cast<size_t>(info.time_bins * info.features));
    std::vector<float> params(static_cast<size_t>(info.params));
    std::vector<uint16_t> scratch;
    for (int64_t row : {int64_t{0}, info.samples - 1}) {
      detail::read_rows_as_float(f, detail::frames_name(split), info.frames_dtype, row, 1,
                                 info.time_bins * info.features, frames.data(), scratch);
      detail::read_rows_as_float(f, detail::params_name(split), info.params_dtype, row, 1,
                                 info.params, params.data(), scratch);
    }
  });
  return detail::inspect_cellspike_here(path, split, expect_time_bins, expect_features,
                                        expect_params);
}

// A share's samples of one window (a run of blocks), and the order they are handed out in.
struct CellSpikeWindow {
  std::vector<float> frames, params;
  std::vector<int64_t> order;
  size_t pos = 0;
  bool exhausted() const { return pos >= order.size(); }
};

struct CellSpikeShare {
  int64_t global = 0;  // index among all shares
  int64_t first = 0;   // first row in the file
  std::unique_ptr<io::H5File> file;
  std::vector<uint16_t> scratch;
  std::vector<int64_t> blocks;  // this epoch's block order
  int64_t window = 0;           // index of `current`
  CellSpikeWindow current, next;
  std::unique_ptr<tbb::task_group> reader;
  bool pending = false;  // `next` is being read
};

struct CellSpikeLoader::State {
  CellSpikeSplitInfo info;
  CellSpikeLoaderOptions o;
  int64_t shard_size = 0, batches = 0, windows = 0, nblocks = 0;
  uint64_t epoch = 0;
  int64_t served = 0;  // batches of this epoch handed out
  std::vector<CellSpikeShare> shares;
  mutable std::mutex stats_mu;
  CellSpikeReadStats stats;

  void read_window(CellSpikeShare& sh, int64_t w, CellSpikeWindow& out) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t tf = info.time_bins * info.features, p = info.params;
    const int64_t b0 = w * o.window_blocks();
    const int64_t b1 = std::min(nblocks, b0 + o.window_blocks());
    int64_t rows = 0;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t lo = sh.blocks[static_cast<size_t>(b)] * o.block_rows();
      rows += std::min(o.block_rows(), shard_size - lo);
    }
    out.frames.resize(static_cast<size_t>(rows * tf));
    out.params.resize(static_cast<size_t>(rows * p));
    int64_t at = 0;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t lo = sh.blocks[static_cast<size_t>(b)] * o.block_rows();
      const int64_t n = std::min(o.block_rows(), shard_size - lo);
      detail::read_rows_as_float(*sh.file, detail::frames_name(info.split), info.frames_dtype,
                                 sh.first + lo, n, tf, out.frames.data() + at * tf, sh.scratch);
      detail::read_rows_as_float(*sh.file, detail::params_name(info.split), info.params_dtype,
                                 sh.first + lo, n, p, out.params.data() + at * p, sh.scratch);
      at += n;
    }
    if (o.shuffle()) {
      out.order =
          data::shuffled_range(0, rows, o.seed(), detail::cellspike_stream(epoch, sh.global, w));
    } else {
      out.order.resize(static_cast<size_t>(rows));
      for (int64_t i = 0; i < rows; ++i) out.order[static_cast<size_t>(i)] = i;
    }
    out.pos = 0;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.bytes += rows * info.bytes_per_sample();
    stats.rows += rows;
    stats.read_seconds += secs;
  }

  void start_next(CellSpikeShare& sh) {
    const int64_t w = sh.window + 1;
    if (!o.prefetch() || w >= windows) return;
    sh.pending = true;
    sh.reader->run([this, &sh, w] { read_window(sh, w, sh.next); });
  }

  // Waits for a share's outstanding read; `rethrow` false swallows its error (cancelling).
  static void join(CellSpikeShare& sh, bool rethrow) {
    if (!sh.pending) return;
    sh.pending = false;
    if (rethrow) {
      sh.reader->wait();
      return;
    }
    try {
      sh.reader->wait();
    } catch (...) {
    }
  }

  void advance(CellSpikeShare& sh) {
    const int64_t w = sh.window + 1;
    IPUML_CHECK(w < windows, "CellSpikeLoader: share ", sh.global, " ran out of samples");
    if (sh.pending) {
      join(sh, true);
      std::swap(sh.current, sh.next);
    } else {
      read_window(sh, w, sh.current);
    }
    sh.window = w;
    start_next(sh);
  }
};

IPUML_INLINE CellSpikeLoader::CellSpikeLoader(const std::string& path,
                                              CellSpikeLoaderOptions options)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.o = std::move(options);
  const auto& o = s.o;
  IPUML_CHECK(o.micro_batch() >= 1 && o.steps_per_batch() >= 1 && o.block_rows() >= 1 &&
                  o.window_blocks() >= 1,
              "CellSpikeLoader: micro_batch, steps_per_batch, block_rows and window_blocks must "
              "be >= 1, got ",
              o.micro_batch(), ", ", o.steps_per_batch(), ", ", o.block_rows(), ", ",
              o.window_blocks());
  IPUML_CHECK(o.num_shards() >= 1 && o.local_shards() >= 1 && o.first_shard() >= 0 &&
                  o.first_shard() + o.local_shards() <= o.num_shards(),
              "CellSpikeLoader: shares ", o.first_shard(), "..",
              o.first_shard() + o.local_shards() - 1, " do not fit in ", o.num_shards(),
              " shares (expected 0 <= first_shard and first_shard + local_shards <= num_shards)");
  IPUML_CHECK(o.max_samples() >= 0, "CellSpikeLoader: max_samples must be >= 0, got ",
              o.max_samples());
  s.info = inspect_cellspike(path, o.split());
  const int64_t used =
      o.max_samples() > 0 ? std::min(o.max_samples(), s.info.samples) : s.info.samples;
  s.shard_size = used / o.num_shards();
  s.batches = s.shard_size / (o.micro_batch() * o.steps_per_batch());
  IPUML_CHECK(s.batches >= 1, "CellSpikeLoader ", path, ": the ", used, " ", o.split(),
              " samples give each of ", o.num_shards(), " replicas ", s.shard_size,
              ", fewer than one host batch of ", o.steps_per_batch(), " x ", o.micro_batch(),
              " (steps x micro-batch)");
  s.nblocks = (s.shard_size + o.block_rows() - 1) / o.block_rows();
  s.windows = (s.nblocks + o.window_blocks() - 1) / o.window_blocks();
  for (int64_t k = 0; k < o.local_shards(); ++k) {
    CellSpikeShare sh;
    sh.global = o.first_shard() + k;
    sh.first = sh.global * s.shard_size;
    sh.file = std::make_unique<io::H5File>(path);
    sh.reader = std::make_unique<tbb::task_group>();
    s.shares.push_back(std::move(sh));
  }
  start_epoch(0);
}

IPUML_INLINE CellSpikeLoader::~CellSpikeLoader() {
  if (s_)
    for (auto& sh : s_->shares) State::join(sh, false);
}
IPUML_INLINE CellSpikeLoader::CellSpikeLoader(CellSpikeLoader&&) noexcept = default;
IPUML_INLINE CellSpikeLoader& CellSpikeLoader::operator=(CellSpikeLoader&& other) noexcept {
  if (this != &other) {
    if (s_)
      for (auto& sh : s_->shares) State::join(sh, false);
    s_ = std::move(other.s_);
  }
  return *this;
}

IPUML_INLINE const CellSpikeSplitInfo& CellSpikeLoader::info() const { return s_->info; }
IPUML_INLINE const CellSpikeLoaderOptions& CellSpikeLoader::options() const { return s_->o; }
IPUML_INLINE int64_t CellSpikeLoader::shard_size() const { return s_->shard_size; }
IPUML_INLINE int64_t CellSpikeLoader::size() const { return s_->batches; }
IPUML_INLINE int64_t CellSpikeLoader::batch_rows() const {
  return s_->o.steps_per_batch() * s_->o.local_shards() * s_->o.micro_batch();
}
IPUML_INLINE CellSpikeReadStats CellSpikeLoader::stats() const {
  std::lock_guard<std::mutex> lock(s_->stats_mu);
  return s_->stats;
}

IPUML_INLINE void CellSpikeLoader::start_epoch(uint64_t epoch) {
  State& s = *s_;
  // A read of the previous epoch's order is of no use now; it reads the epoch, so it is waited
  // for before the epoch changes.
  for (auto& sh : s.shares) State::join(sh, false);
  s.epoch = epoch;
  s.served = 0;
  for (auto& sh : s.shares) {
    if (s.o.shuffle())
      sh.blocks = data::shuffled_range(0, s.nblocks, s.o.seed(),
                                       detail::cellspike_stream(epoch, sh.global, 0xffffff));
    else {
      sh.blocks.resize(static_cast<size_t>(s.nblocks));
      for (int64_t b = 0; b < s.nblocks; ++b) sh.blocks[static_cast<size_t>(b)] = b;
    }
    // Window 0 is read when first needed, so constructing a loader costs no I/O; with prefetch
    // every share's first window starts reading now, in parallel with the caller.
    sh.window = -1;
    sh.current = CellSpikeWindow();
    if (s.o.prefetch()) s.start_next(sh);
  }
}

IPUML_INLINE bool CellSpikeLoader::next(data::Example& out) {
  State& s = *s_;
  if (s.served >= s.batches) return false;
  const auto& o = s.o;
  const int64_t tf = s.info.time_bins * s.info.features, p = s.info.params;
  const int64_t rows = batch_rows();
  Tensor x = empty({rows, s.info.time_bins, s.info.features}, kFloat32);
  Tensor y = empty({rows, p}, kFloat32);
  float* xd = x.data_ptr<float>();
  float* yd = y.data_ptr<float>();
  int64_t r = 0;
  for (int64_t step = 0; step < o.steps_per_batch(); ++step)
    for (auto& sh : s.shares)
      for (int64_t m = 0; m < o.micro_batch(); ++m, ++r) {
        if (sh.window < 0 || sh.current.exhausted()) s.advance(sh);
        const int64_t i = sh.current.order[sh.current.pos++];
        std::memcpy(xd + r * tf, sh.current.frames.data() + i * tf,
                    static_cast<size_t>(tf) * sizeof(float));
        std::memcpy(yd + r * p, sh.current.params.data() + i * p,
                    static_cast<size_t>(p) * sizeof(float));
      }
  ++s.served;
  if (s.served == s.batches)
    for (auto& sh : s.shares) State::join(sh, false);  // the dropped tail is not needed
  out = {x, y};
  return true;
}

IPUML_INLINE std::string cellspike_meta_yaml(const CellSpikeMeta& meta) {
  auto list = [](const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s + "]";
  };
  return ipuml::detail::str("numFeature: ", meta.num_features, "\nnumTimeBin: ", meta.num_time_bins,
                            "\nnumPar: ", meta.num_par, "\nfeatureName: ", list(meta.feature_names),
                            "\nparName: ", list(meta.par_names), "\n");
}

}  // namespace ipuml::datasets
