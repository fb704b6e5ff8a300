// The shape of an emulated machine as the emulator core sees it: devices (chips) of units
// (units, processing elements, pattern units), each unit with its own memory, one clock. The
// target model (target_model.hpp) says what each unit costs; this is only where work can go.
#pragma once

#include <cstdint>
#include <string>

namespace ipuml::emu {

struct Machine {
  std::string name;              // the target preset, e.g. "ipu2"
  int64_t devices = 1;           // chips the program is planned over
  int64_t units_per_device = 1;  // units of each device, the planner's placement grain
  int64_t bytes_per_unit = 0;    // memory of one unit
  double clock_hz = 1e9;         // the clock every cycle count is at
  int64_t alignment_bytes = 8;   // each tensor piece on a unit starts aligned
  // Units of a device laid out as a 2-D mesh of mesh_columns columns (placement rectangles);
  // 0: the units form a line (placement spans).
  int64_t mesh_columns = 0;
  // What users of the machine call a device and a unit, in messages and reports.
  std::string device_noun = "device", unit_noun = "unit";

  int64_t total_units() const { return devices * units_per_device; }
  double device_bytes() const {
    return static_cast<double>(units_per_device) * static_cast<double>(bytes_per_unit);
  }
  bool operator==(const Machine&) const = default;
};

}  // namespace ipuml::emu
