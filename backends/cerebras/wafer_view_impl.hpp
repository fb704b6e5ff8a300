// Bodies of the wafer view (compiled once in src/lib/cerebras_backend.cpp).
#pragma once

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include <ipuml/backends/cerebras/wafer_view.hpp>

namespace ipuml::cerebras {

namespace wvdetail {

// The cell at position i of the serpentine: bands of `band` rows (the last may be shorter); in
// a band, column after column (down, then up the next), left to right in even bands and right
// to left in odd ones.
inline int64_t serpentine_cell(int64_t i, int64_t columns, int64_t rows, int64_t band) {
  const int64_t per_band = columns * band;
  const int64_t b = i / per_band, in_band = i % per_band;
  const int64_t top = b * band, height = std::min(band, rows - top);
  const int64_t col_in = in_band / height, row_in = in_band % height;
  const int64_t col = b % 2 == 0 ? col_in : columns - 1 - col_in;
  const int64_t row = top + (col_in % 2 == 0 ? row_in : height - 1 - row_in);
  return row * columns + col;
}

}  // namespace wvdetail

IPUML_INLINE WaferCells place_regions(const PipelineLayout& l, const Target& t) {
  WaferCells w;
  w.columns = t.block_columns();
  w.rows = t.block_rows();
  // Bands about as tall as a typical region is wide keep regions compact.
  w.band_rows = std::clamp<int64_t>(w.rows / 8, 1, w.rows);
  const int64_t cells = w.columns * w.rows;
  w.region.assign(static_cast<size_t>(cells), -1);
  if (!l.fits || l.kernels.empty()) return w;
  // The grid's whole blocks leave out the fabric's ragged edge: a cell stands for its share of
  // every PE, so that a region's cells are its share of the wafer.
  const double per_cell = static_cast<double>(t.pes()) / static_cast<double>(cells);
  // Cells by cumulative PEs, so rounding never adds up past the wafer.
  double before = 0;
  for (size_t k = 0; k < l.kernels.size(); ++k) {
    const double after = before + static_cast<double>(l.kernels[k].pes);
    const int64_t c0 =
        std::min<int64_t>(cells, static_cast<int64_t>(std::llround(before / per_cell)));
    const int64_t c1 = std::min<int64_t>(
        cells, std::max<int64_t>(c0 + 1, static_cast<int64_t>(std::llround(after / per_cell))));
    for (int64_t i = c0; i < c1; ++i)
      w.region[static_cast<size_t>(wvdetail::serpentine_cell(i, w.columns, w.rows, w.band_rows))] =
          static_cast<int32_t>(k);
    before = after;
  }
  return w;
}

IPUML_INLINE double region_utilisation(const PipelineLayout& l, size_t k) {
  return l.sample_cycles > 0 ? l.kernels.at(k).cycles_per_sample / l.sample_cycles : 0.0;
}

IPUML_INLINE double wafer_utilisation(const PipelineLayout& l) {
  if (l.sample_cycles <= 0 || l.pes_total <= 0) return 0;
  double busy = 0;
  for (auto& k : l.kernels) busy += static_cast<double>(k.pes) * k.cycles_per_sample;
  return busy / (static_cast<double>(l.pes_total) * l.sample_cycles);
}

IPUML_INLINE std::string layout_json(const Target& t, ExecutionMode mode, const std::string& why,
                                     const std::optional<PipelineLayout>& layout) {
  using nlohmann::json;
  json j;
  j["schema"] = "ipuml.layout/1";
  j["device"] = "CS-2";
  j["target"] = t.name;
  j["mode"] = mode_name(mode);
  j["why"] = why;
  j["fabric"] = {{"columns", t.fabric_columns}, {"rows", t.fabric_rows}, {"pes", t.pes()}};
  if (!layout) {
    j["regions"] = json::array();
    j["note"] =
        "weight streaming: every layer runs on the whole wafer in turn, its weights streamed in "
        "from MemoryX; the operations and timeline sections show each layer's time";
    return j.dump();
  }
  const PipelineLayout& l = *layout;
  const WaferCells w = place_regions(l, t);
  j["grid"] = {
      {"columns", w.columns},
      {"rows", w.rows},
      {"band_rows", w.band_rows},
      {"pes_per_cell", static_cast<double>(t.pes()) / static_cast<double>(w.region.size())},
      {"cells", w.region}};
  json regions = json::array();
  for (size_t k = 0; k < l.kernels.size(); ++k) {
    const PipelineKernel& r = l.kernels[k];
    regions.push_back({{"name", r.label},
                       {"ops", r.nodes},
                       {"pes", r.pes},
                       {"min_pes", r.min_pes},
                       {"width", r.width},
                       {"height", r.height},
                       {"state_bytes", r.state_bytes},
                       {"activation_bytes", r.activation_bytes},
                       {"flops", r.flops},
                       {"cycles_per_sample", r.cycles_per_sample},
                       {"utilisation", region_utilisation(l, k)}});
  }
  j["regions"] = regions;
  j["fits"] = l.fits;
  j["message"] = l.message;
  j["slowest"] = l.slowest;
  j["samples"] = l.samples;
  j["pes_used"] = l.pes_used;
  j["pes_needed"] = l.pes_needed;
  j["sample_cycles"] = l.sample_cycles;
  j["fill_cycles"] = l.fill_cycles;
  j["update_cycles"] = l.update_cycles;
  j["step_cycles"] = l.step_cycles;
  j["utilisation"] = wafer_utilisation(l);
  return j.dump();
}

}  // namespace ipuml::cerebras
