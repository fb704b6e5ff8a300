// Bodies of the eager IPU device (compiled once in compiled mode).
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <ipuml/backends/ipu/eager.hpp>
#include <ipuml/backends/ipu/compile.hpp>
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml::ipu {

namespace eager_detail {

// Plans are kept by key; past this many, the cache starts again (ops whose attributes carry
// changing scalars would otherwise grow it without bound).
inline constexpr size_t kMaxPrograms = 4096;

struct State {
  std::mutex mu;  // one op at a time: the emulator parallelises each op over the tiles itself
  std::unordered_map<std::string, std::unique_ptr<Executable>> programs;
  std::map<int, EagerProfile> profiles;  // by device index
  int64_t compiled = 0;
};
inline State& state() {
  static State* s = new State();  // never destroyed: tensors may run ops from static dtors
  return *s;
}

inline std::string key_of(ir::OpKind kind, const ir::Attrs& attrs,
                          const std::vector<Tensor>& inputs) {
  std::string k = ir::op_name(kind);
  k += '{' + attrs.key() + '}';
  for (auto& t : inputs) k += std::string(dtype_name(t.dtype())) + shape_str(t.shape());
  return k;
}

inline std::unique_ptr<Executable> compile_op(ir::OpKind kind, const ir::Attrs& attrs,
                                              const std::vector<Tensor>& inputs,
                                              const std::vector<Tensor>& outputs) {
  ir::Tracer tracer;
  std::vector<Tensor> symbolic;
  for (auto& t : inputs) symbolic.push_back(tracer.input(ir::TensorMeta{t.shape(), t.dtype()}));
  std::vector<ir::TensorMeta> metas;
  for (auto& t : outputs) metas.push_back({t.shape(), t.dtype()});
  ir::Trace trace = tracer.finish(tracer.record(kind, attrs, symbolic, metas));
  CompileOptions co;
  co.progress = false;
  // An eager op runs whatever its size, as on the host; the memory report still says when it
  // would not fit a real IPU's tiles.
  co.allow_out_of_memory = true;
  return compile(trace.graph, target_preset("ipu2"), co);
}

}  // namespace eager_detail

IPUML_INLINE void run_eager_op(Device device, ir::OpKind kind, const ir::Attrs& attrs,
                               const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  // The emulator reads host tensors; give it CPU copies so that nothing it does with them
  // dispatches back to this device.
  std::vector<Tensor> host;
  host.reserve(inputs.size());
  for (auto& t : inputs) host.push_back(detail::copy_to_device(t, Device()));
  auto& s = eager_detail::state();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string key = eager_detail::key_of(kind, attrs, inputs);
  auto it = s.programs.find(key);
  if (it == s.programs.end()) {
    if (s.programs.size() >= eager_detail::kMaxPrograms) s.programs.clear();
    it = s.programs.emplace(key, eager_detail::compile_op(kind, attrs, inputs, outputs)).first;
    ++s.compiled;
  }
  Executable& exe = *it->second;
  std::vector<Tensor> results = exe.run(host, {}, 0);
  IPUML_CHECK(results.size() == outputs.size(), "ipu eager: ", ir::op_name(kind), " gave ",
              results.size(), " results for ", outputs.size(), " outputs");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor r = results[i].is_contiguous() ? results[i] : results[i].contiguous();
    IPUML_CHECK(r.shape() == outputs[i].shape() && r.dtype() == outputs[i].dtype(),
                "ipu eager: ", ir::op_name(kind), " result ", i, " has shape ",
                shape_str(r.shape()), ", expected ", shape_str(outputs[i].shape()));
    std::memcpy(outputs[i].raw_data(), r.raw_data(),
                static_cast<size_t>(r.numel()) * dtype_size(r.dtype()));
  }
  const RunCycles& c = exe.last_run_cycles();
  EagerProfile& p = s.profiles[device.index()];
  p.cycles += c.total;
  p.simulated_seconds += c.simulated_seconds;
  ++p.ops;
}

IPUML_INLINE EagerProfile eager_profile(Device device) {
  IPUML_CHECK(device.is_ipu(), "ipu::eager_profile: expected an IPU device, got ", device);
  auto& s = eager_detail::state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.profiles.find(device.index());
  return it == s.profiles.end() ? EagerProfile{} : it->second;
}

IPUML_INLINE double eager_cycles(Device device) { return eager_profile(device).cycles; }

IPUML_INLINE void reset_eager_profile(Device device) {
  IPUML_CHECK(device.is_ipu(), "ipu::reset_eager_profile: expected an IPU device, got ", device);
  auto& s = eager_detail::state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.profiles.erase(device.index());
}

IPUML_INLINE int64_t eager_programs_compiled() {
  auto& s = eager_detail::state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.compiled;
}

}  // namespace ipuml::ipu
