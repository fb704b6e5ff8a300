// The eager IPU device: ops on tensors on Device(kIPU, i) run one at a time, each as a
// single-op program compiled by the emulator and cached, and their modelled cycles add up.
#pragma once

#include <cstdint>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/core/device.hpp>
#include <ipuml/ir/attrs.hpp>
#include <ipuml/ir/op_kind.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::ipu {

// What eager ops on an IPU device cost on the emulated target (an ipu2 IPU) since the program
// started or since reset_eager_profile(device): modelled cycles, seconds at the target's clock,
// and the ops run.
struct EagerProfile {
  double cycles = 0;
  double simulated_seconds = 0;
  int64_t ops = 0;
};
EagerProfile eager_profile(Device device);
// The modelled cycles of the eager ops run on `device` (eager_profile(device).cycles).
double eager_cycles(Device device);
void reset_eager_profile(Device device);
// How many single-op programs have been compiled (each distinct op kind, attributes and input
// shapes and dtypes is compiled once).
int64_t eager_programs_compiled();

// The kernel-table entry of the IPU backend: runs `kind` on `device`'s emulated IPU. Inputs are
// contiguous, outputs allocated with the inferred metas.
void run_eager_op(Device device, ir::OpKind kind, const ir::Attrs& attrs,
                  const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

}  // namespace ipuml::ipu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/ipu/eager_impl.hpp>
#endif
