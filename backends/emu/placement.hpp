// Where the units of one op or tensor go on a device: the placement shape of the target's
// machine. A line machine (the IPU's tiles) takes a run of consecutive units, wrapping around;
// a 2-D mesh (Machine::mesh_columns > 0) takes a rectangle as near square as the mesh allows,
// so that what its units exchange crosses as few hops as it can. The planner places with these
// and asks the target what a step's exchange costs on that shape
// (TargetModel::region_exchange_cycles).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <ipuml/backends/emu/machine.hpp>

namespace ipuml::emu {

// The units of a region: `width` x `height` of a mesh; a line of `width` units has height 1.
struct RegionShape {
  int64_t width = 1, height = 1;
};

// Rows of a mesh machine (0 for a line).
inline int64_t mesh_rows(const Machine& m) {
  return m.mesh_columns > 0 ? m.units_per_device / m.mesh_columns : 0;
}

// Whether `parts` units of a mesh take a band of whole rows rather than a rectangle: a region
// of a quarter of the mesh or more. Rectangles that large cannot tile the mesh (two 64 x 64
// squares do not fit a 93 x 124 wafer side by side), so in sequence they would all cover its
// middle; bands of whole rows, one below the other and wrapping from the last row to the first,
// cover it evenly.
inline bool is_band(const Machine& m, int64_t parts) {
  return m.mesh_columns > 0 && parts > m.mesh_columns && 4 * parts >= m.units_per_device;
}

// The shape `parts` units take: a line of them, or on a mesh the squarest rectangle that holds
// them, no wider than the mesh's columns nor taller than its rows, or a band of whole rows.
inline RegionShape region_shape(const Machine& m, int64_t parts) {
  parts = std::max<int64_t>(parts, 1);
  if (m.mesh_columns <= 0) return {parts, 1};
  const int64_t cols = m.mesh_columns, rows = std::max<int64_t>(mesh_rows(m), 1);
  if (is_band(m, parts)) return {cols, std::min(rows, (parts + cols - 1) / cols)};
  int64_t w = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(parts))));
  w = std::clamp<int64_t>(std::max(w, (parts + rows - 1) / rows), 1, cols);
  return {w, (parts + w - 1) / w};
}

// The top-left unit of a region of shape `s` at `cursor`, or the first place after it where the
// rectangle lies inside the mesh (the next row's start, else the mesh's corner). A line region
// starts at the cursor and wraps; a band (a region as wide as the mesh) starts at the first row
// start from the cursor on and wraps from the last row to the first.
inline int64_t region_origin(const Machine& m, RegionShape s, int64_t cursor) {
  if (m.mesh_columns <= 0) return cursor;
  const int64_t cols = m.mesh_columns, rows = mesh_rows(m);
  int64_t r = cursor / cols, c = cursor % cols;
  if (s.width >= cols) return ((r + (c > 0 ? 1 : 0)) % std::max<int64_t>(rows, 1)) * cols;
  if (c + s.width > cols) ++r, c = 0;
  if (r + s.height > rows) r = 0, c = 0;
  return r * cols + c;
}

}  // namespace ipuml::emu
