// libFuzzer harness: the cellSpike HDF5 reader (inspect_cellspike and CellSpikeLoader). The input
// is the file as found on disk; when its train split passes inspection, a loader streams one
// epoch of at most 16 samples through it, with prefetch on a oneTBB worker. Every input must load
// or throw ipuml::Error, and a loaded batch must have the rows and shapes the loader promises.
#include <ipuml/core/error.hpp>
#include <ipuml/datasets/cellspike.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ipuml;
  fuzz::short_isolation_timeout();
  const std::string path = fuzz::write_file("cs.h5", data, size);
  for (const char* split : {"train", "val"}) {
    try {
      datasets::inspect_cellspike(path, split);
    } catch (const Error&) {
    }
  }
  try {
    datasets::CellSpikeLoader loader(path, datasets::CellSpikeLoaderOptions()
                                               .split("train")
                                               .micro_batch(2)
                                               .max_samples(16)
                                               .block_rows(3)
                                               .window_blocks(2)
                                               .prefetch(size % 2 == 0));
    const auto& info = loader.info();
    loader.start_epoch(1);
    data::Example ex;
    int64_t batches = 0;
    while (loader.next(ex)) {
      ++batches;
      if (ex.data.sizes() != Shape{loader.batch_rows(), info.time_bins, info.features} ||
          ex.target.sizes() != Shape{loader.batch_rows(), info.params})
        __builtin_trap();
    }
    if (batches != loader.size()) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
