// A generator of cellSpike files from a simulated neuron: four Hodgkin-Huxley compartments (soma,
// axon, apical dendrite, basal "soma-dendrite") whose 15 conductances come from the targets.
#pragma once

#include <ipuml/core/config.hpp>

#if IPUML_WITH_HDF5

#include <cstdint>
#include <functional>
#include <string>

#include <ipuml/datasets/cellspike.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::datasets {

inline constexpr int64_t kCellSpikeProbes = 4;
inline constexpr int64_t kCellSpikeParams = 15;

// The simulated neuron's description: probe and parameter names, 1600 bins of 0.125 ms (8 kHz).
CellSpikeMeta cellspike_gen_meta(int64_t time_bins = 1600);

// Simulates one neuron whose 15 parameters are `unit_par` in [-1, 1] (each a log-scale of its
// conductance around the textbook value) under the fixed "excite" current steps into the soma,
// and writes its four probes' voltages, (V + 65 mV) / 40 mV, as frames [time_bins, 4].
void simulate_cellspike(const float* unit_par, int64_t time_bins, float* frames);

struct CellSpikeGenOptions {
  IPUML_ARG(int64_t, train) = 2048;
  IPUML_ARG(int64_t, val) = 256;
  IPUML_ARG(int64_t, test) = 256;
  IPUML_ARG(int64_t, time_bins) = 1600;
  IPUML_ARG(bool, fp16) = false;  // float16 frames and targets (the _fp16 files)
  IPUML_ARG(uint64_t, seed) = 1;
  IPUML_ARG(double, noise) = 0.02;        // standard deviation of the recording noise on frames
  IPUML_ARG(int64_t, chunk_rows) = 2048;  // samples simulated and written at a time
};

// Writes a cellSpike file at `path` (atomically: a temporary renamed over it when complete), a
// chunk at a time, so files larger than memory can be made. `progress(done, total)` is called
// after each chunk. Samples are a pure function of (seed, split, index).
void generate_cellspike(const std::string& path, const CellSpikeGenOptions& options,
                        const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace ipuml::datasets

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/cellspike_gen_impl.hpp>
#endif

#endif  // IPUML_WITH_HDF5
