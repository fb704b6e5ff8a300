// The wafer as a report shows it: which region of PEs each layer's kernel holds, how busy each
// region is at the pipeline's rate, and which is the slowest (layout.json, drawn by ipuml-report).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ipuml/backends/cerebras/layer_pipeline.hpp>
#include <ipuml/backends/cerebras/target.hpp>
#include <ipuml/backends/cerebras/wse_model.hpp>
#include <ipuml/core/config.hpp>

namespace ipuml::cerebras {

// The wafer's planning grid (pe_block x pe_block PEs a cell, row-major) with the region each
// cell belongs to, or -1 where no kernel is placed. Regions are laid out in the step's order as
// contiguous runs of a serpentine over bands of `band_rows` cell rows (left to right in even
// bands, right to left in odd ones, each band's columns walked down then up), so consecutive
// layers are neighbours and every region's area is its share of the wafer's PEs to the nearest
// cell. The cost model sizes regions by PE count; these positions draw them, they do not change
// their time.
struct WaferCells {
  int64_t columns = 0, rows = 0, band_rows = 0;
  std::vector<int32_t> region;  // columns x rows
};
WaferCells place_regions(const PipelineLayout& l, const Target& t);

// Each region's share of the step when the pipeline runs at its slowest region's rate (1 for
// the slowest), and the fraction of the wafer's PE-cycles that are busy in the steady state.
double region_utilisation(const PipelineLayout& l, size_t k);
double wafer_utilisation(const PipelineLayout& l);

// layout.json ("ipuml.layout/1"): the execution mode and why, and, for a pipelined layout, the
// grid, its cells and a row per region (its ops, PEs, memory, cycles per sample, utilisation).
// In weight streaming every layer takes the whole wafer in turn, and there are no regions.
std::string layout_json(const Target& t, ExecutionMode mode, const std::string& why,
                        const std::optional<PipelineLayout>& layout);

}  // namespace ipuml::cerebras

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cerebras/wafer_view_impl.hpp>
#endif
