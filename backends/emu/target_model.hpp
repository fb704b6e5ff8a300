// The target-model interface: what the emulator core asks of an emulated accelerator. The core
// (planner, memory accounting, executor, reports) plans ops over the units of the Machine and
// asks the target for every cost and every memory term it charges; it never names a machine.
// A bulk-synchronous target (backends/ipu/ipu_model.hpp) sums its steps; a dataflow
// target overlaps them (program_cycles). Adding a target: a folder under backends/ with a
// class deriving from TargetModel, and its construction where its presets are named.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/backends/emu/machine.hpp>
#include <ipuml/backends/emu/memory_category.hpp>
#include <ipuml/core/dtype.hpp>

namespace ipuml::emu {

// Memory a target charges on a unit besides tensor data (docs/memory-model.md for the device's).
struct MemoryTerms {
  int64_t code_bytes_matrix = 0;      // a matrix kernel's code, once per unit that runs it
  int64_t code_bytes_vector = 0;      // any other kernel's code, once per unit
  int64_t state_bytes_per_field = 0;  // per kernel instance: a header plus one per operand
  int64_t receive_code_bytes_per_transfer = 0;  // per unit, per operand received in a step
  int64_t stack_bytes_per_unit = 0;             // always resident on every unit
};

class TargetModel {
 public:
  virtual ~TargetModel() = default;

  // Where work can go.
  virtual const Machine& machine() const = 0;
  // One line naming the target for reports ("ipu2: 1 IPU x 1472 tiles x 624 KiB, 1.33 GHz" for an
  // IPU).
  virtual std::string describe() const = 0;
  // Every parameter, as a JSON object: part of the plan cache key and of the profile report.
  virtual std::string to_json() const = 0;

  // Cycles one unit spends on `flops` operations touching `bytes` of its memory, spread over
  // `parallel_items` independent pieces; `matrix` selects the matrix engine's rate.
  virtual double compute_cycles(double flops, double bytes, DType dtype, bool matrix,
                                int64_t parallel_items) const = 0;
  // One unit's peak rate in FLOPs per cycle for `dtype` (its matrix engine's): what an op's
  // achieved fraction of peak is measured against. By default what compute_cycles charges a
  // large matrix op spread over many items.
  virtual double peak_flops_per_cycle(DType dtype) const {
    const double flops = 1e12;
    const double cycles = compute_cycles(flops, 0.0, dtype, true, int64_t{1} << 20);
    return cycles > 0 ? flops / cycles : 0.0;
  }
  // Cycles to bring `bytes` into the busiest unit of a step from other units of its device.
  virtual double exchange_cycles(double bytes_into_unit) const = 0;
  // The same on a step whose units form a `width` x `height` region (placement.hpp: a line of
  // `width` units has height 1): a mesh charges the hops across it. By default the shape does
  // not matter (the IPU's exchange reaches every tile alike).
  virtual double region_exchange_cycles(double bytes_into_unit, int64_t width,
                                        int64_t height) const {
    (void)width, (void)height;
    return exchange_cycles(bytes_into_unit);
  }
  // A step's barrier inside one device.
  virtual double sync_cycles() const = 0;
  // What each further serial repetition of a step's kernel costs (its launch).
  virtual double repeat_cycles() const = 0;
  // A barrier across devices (and with the host).
  virtual double device_sync_cycles() const = 0;
  // Cycles to move `bytes` from one device to another (the barrier not included).
  virtual double inter_device_cycles(double bytes) const = 0;
  // Cycles to move `bytes` between the host and one device, one direction, while each of
  // `replicas` replicas of the program moves as much at the same time (replicas on one machine
  // may share its host link).
  virtual double host_cycles(double bytes, int64_t replicas) const = 0;
  // The host's part of a step, per direction of host traffic: the device waits for the host to
  // sync before a stream copy. By default a barrier across devices.
  virtual double host_sync_cycles() const { return device_sync_cycles(); }
  // Cycles to stream `bytes` to or from a device's off-chip memory.
  virtual double streaming_cycles(double bytes) const = 0;
  // How states kept off chip (ir::Value::offchip) move. By default (the IPU's streaming memory)
  // a state comes onto the units when a step first reads it and stays until its last reader,
  // and the traffic adds to the step's time. A weight-streaming machine (the CS-2 with MemoryX)
  // streams a state in again for every step that reads it and drops it after (per_read), and
  // fetches a step's states while the step before it computes (prefetch): only what the
  // previous step's compute does not cover costs time.
  struct Streaming {
    bool per_read = false;
    bool prefetch = false;
  };
  virtual Streaming streaming() const { return {}; }
  // Whether the off-chip memory computes too (the CS-2's MemoryX runs the optimizer on the
  // weights it keeps). Then an elementwise op whose every result is the new value of an
  // off-chip state runs there, not on the units: it takes no unit memory or unit time, its
  // on-chip operands (the gradients) stream out to it, its off-chip operands stay where they
  // are, and offchip_op_cycles(bytes it reads and writes) is its time there, overlapping the
  // units' work from when its operands are ready. No by default (the IPU's streaming memory
  // only stores).
  virtual bool computes_offchip() const { return false; }
  virtual double offchip_op_cycles(double bytes) const {
    (void)bytes;
    return 0;
  }
  // Memory terms besides tensor data.
  virtual MemoryTerms memory_terms() const = 0;
  // The target's name of memory category c (MemCategory) in reports and errors: its users'
  // word for kernel state, receive code, stacks; the core's own names by default.
  virtual std::string memory_category_name(int c) const { return mem_category_name(c); }
  // How a user of this target asks for what out-of-memory advice suggests: spreading the model
  // over more devices, and keeping optimizer state off chip.
  virtual std::string more_devices_hint() const { return "more " + machine().device_noun + "s"; }
  virtual std::string offchip_state_hint() const { return "optimizer state in off-chip memory"; }
  // How a user gives the emulated system more devices.
  virtual std::string device_count_hint() const {
    return "give the target more " + machine().device_noun + "s";
  }

  // How a program's per-device cycles combine into the step's: a bulk-synchronous machine
  // whose devices run a sharded program one after another sums them (the default); a dataflow
  // machine whose devices overlap takes the slowest.
  virtual double program_cycles(const std::vector<double>& per_device) const {
    double s = 0;
    for (double c : per_device) s += c;
    return s;
  }
  // Cycles of a gradient all-reduce of `bytes` (one replica's) over `replicas` replicas of
  // `devices_per_replica` devices each.
  virtual double allreduce_cycles(double bytes, int64_t replicas,
                                  int64_t devices_per_replica) const = 0;
};

}  // namespace ipuml::emu
