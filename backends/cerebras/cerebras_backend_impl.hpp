// Bodies of the Cerebras backend and its executable (compiled once in
// src/lib/cerebras_backend.cpp).
#pragma once

#include <algorithm>
#include <sstream>

#include <ipuml/backends/cerebras/cerebras_backend.hpp>
#include <ipuml/backends/cerebras/wafer_view.hpp>
#include <ipuml/backends/emu/backend_options.hpp>
#include <ipuml/backends/emu/executor.hpp>
#include <ipuml/backends/emu/node_roles.hpp>
#include <ipuml/backends/emu/profile.hpp>
#include <ipuml/backends/emu/target_fields.hpp>

namespace ipuml::cerebras {

namespace cdetail {

// The layout's time as the program's cycles: the samples at the slowest region's rate and the
// update as compute, the pipeline's fill and drain as sync; the host's streams as the core
// counted them.
inline emu::RunCycles layout_cycles(const PipelineLayout& l, const emu::RunCycles& core,
                                    double clock_hz) {
  emu::RunCycles c;
  c.per_device.assign(1, emu::DeviceCycles{});
  auto& d = c.per_device[0];
  d.compute = static_cast<double>(l.samples) * l.sample_cycles + std::ceil(l.update_cycles);
  d.sync = l.fill_cycles;
  for (auto& pd : core.per_device) d.host += pd.host;
  c.total = d.total();
  c.simulated_seconds = c.total / clock_hz;
  return c;
}

inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// layout.json beside the program's profile.json when reports are on (wafer_view.hpp).
inline void write_layout(const CsxExecutable& exe) {
  const std::string& dir = exe.program().report_directory();
  if (dir.empty()) return;
  emu::write_report_file(dir, "layout.json",
                         layout_json(wse_model_of(exe.program().model()).target(), exe.mode(),
                                     exe.why(), exe.layout()));
}

}  // namespace cdetail

IPUML_INLINE CsxExecutable::CsxExecutable(std::unique_ptr<emu::Executable> exe, ExecutionMode mode,
                                          std::string why, std::optional<PipelineLayout> layout)
    : emu::BackendExecutable(std::move(exe), false),
      mode_(mode),
      why_(std::move(why)),
      layout_(std::move(layout)) {
  if (layout_ && layout_->fits)
    program().set_cycles(
        cdetail::layout_cycles(*layout_, program().plan().cycles, program().machine().clock_hz));
  cdetail::write_layout(*this);
}

IPUML_INLINE backend::MemoryFit CsxExecutable::memory_fit() const {
  if (!layout_) return emu::BackendExecutable::memory_fit();
  const Target& t = wse_model_of(program().model()).target();
  backend::MemoryFit f;
  f.device = "CS-2";
  f.unit = "PE";
  f.unit_bytes = t.bytes_per_pe;
  const auto& l = *layout_;
  double fullest = 0;
  for (auto& k : l.kernels) {
    const double pes = static_cast<double>(std::max<int64_t>(k.pes, k.min_pes));
    fullest = std::max(fullest, (k.state_bytes + k.activation_bytes) / pes);
  }
  f.fullest_unit.push_back(static_cast<int64_t>(std::ceil(fullest)));
  f.device_bytes.push_back(static_cast<int64_t>(l.state_bytes + l.activation_bytes));
  f.categories.emplace_back("weights_optimizer_state_gradients",
                            static_cast<int64_t>(l.state_bytes));
  f.categories.emplace_back("activations_in_flight", static_cast<int64_t>(l.activation_bytes));
  f.fits = l.fits;
  f.message = l.message;
  return f;
}

IPUML_INLINE std::string CsxExecutable::target_description() const {
  return emu::BackendExecutable::target_description() + " (" + why_ + ")";
}

IPUML_INLINE void CsxExecutable::print_summary(std::ostream& os, double samples_per_step) const {
  emu::BackendExecutable::print_summary(os, samples_per_step);
  os << "Execution mode: " << mode_name(mode_) << " (" << why_ << ")\n";
  if (layout_) os << describe(*layout_, wse_model_of(program().model()).target());
}

IPUML_INLINE void CsxExecutable::share_memory_image(backend::Executable& update,
                                                    const std::vector<bool>& shared,
                                                    bool allow_out_of_memory) {
  if (!layout_) {
    emu::BackendExecutable::share_memory_image(update, shared, allow_out_of_memory);
    return;
  }
  auto* u = dynamic_cast<CsxExecutable*>(&update);
  IPUML_CHECK(u != nullptr, "cerebras backend: the weight update was compiled by another backend");
  const ir::Graph& ug = u->program().graph();
  double extra = 0;
  for (size_t i = 0; i < ug.states.size() && i < shared.size(); ++i)
    if (!shared[i])
      extra += static_cast<double>(ug.values[static_cast<size_t>(ug.states[i])].meta.nbytes());
  const Target& t = wse_model_of(program().model()).target();
  layout_ = plan_layer_pipeline(program().graph(), t, layout_->samples, extra);
  if (layout_->fits)
    program().set_cycles(
        cdetail::layout_cycles(*layout_, program().plan().cycles, program().machine().clock_hz));
  cdetail::write_layout(*this);
  if (!layout_->fits && !allow_out_of_memory) fail(layout_->message);
}

IPUML_INLINE std::vector<backend::DeviceInfo> CerebrasBackend::devices() const {
  const Target t = target_preset("wse2");
  backend::DeviceInfo d;
  d.name = "CS-2 (" + t.name + ")";
  d.memory_bytes = static_cast<size_t>(t.wafer_bytes());
  d.compute_units = static_cast<int>(t.pes());
  d.description = to_string(t);
  return {d};
}

IPUML_INLINE std::unique_ptr<backend::Executable> CerebrasBackend::compile(
    const ir::Graph& graph, const backend::ProgramOptions& program,
    const backend::CompileOptions& options) const {
  emu::OptionTaker o(options);
  Target t = target_preset(o.take("target", "wse2"));
  emu::for_each_override(o.take("target_overrides", ""),
                         [&](const std::string& item) { apply_override(t, item); });
  const std::string strategy = o.take("execution_strategy", "auto");
  IPUML_CHECK(strategy == "auto" || strategy == "pipeline" || strategy == "weight_streaming",
              "cerebras backend: execution_strategy must be auto, pipeline or weight_streaming, "
              "got '",
              emu::fields::printable(strategy), "'");
  for (auto& [k, v] : o.rest())
    fail("cerebras backend: unknown compile option '", emu::fields::printable(k),
         "' (expected target, target_overrides or execution_strategy)");
  const int64_t replicas = program.replicas;
  IPUML_CHECK(program.devices_per_replica == 1,
              "cerebras backend: a model runs on the whole "
              "wafer of each CS-2, but this one is placed on ",
              program.devices_per_replica,
              " devices per replica (BeginBlock / ipu placement is for IPUs)");
  IPUML_CHECK(replicas >= 1 && replicas <= t.max_systems, "cerebras backend: num_csx (", replicas,
              ") must be in [1, ", t.max_systems, "], the CS-2s one cluster joins");

  emu::CompileOptions co = emu::compile_options_for(program, replicas);

  const bool update_program = cdetail::ends_with(program.name, "weight_update");
  const int64_t samples = emu::batch_of(graph);  // the batch one CS-2 runs
  ExecutionMode mode = ExecutionMode::WeightStreaming;
  std::string why;
  std::optional<PipelineLayout> layout;
  if (update_program) {
    std::lock_guard<std::mutex> lock(mu_);
    mode = last_step_mode_.value_or(ExecutionMode::WeightStreaming);
    why = "the weight update runs where its step keeps the weights";
  } else if (strategy == "weight_streaming") {
    why = "execution_strategy weight_streaming";
  } else if (strategy == "pipeline") {
    IPUML_CHECK(replicas == 1,
                "cerebras backend: pipelined execution runs on one CS-2, but "
                "num_csx is ",
                replicas,
                "; only weight streaming (execution_strategy weight_streaming) runs data "
                "parallel across CS-2s");
    layout = plan_layer_pipeline(graph, t, samples);
    if (!layout->fits && !program.allow_out_of_memory) fail("cerebras backend: ", layout->message);
    mode = ExecutionMode::Pipelined;
    why = "execution_strategy pipeline";
  } else if (replicas > 1) {
    why = "num_csx=" + std::to_string(replicas) +
          ": only weight streaming runs data parallel across CS-2s";
  } else {
    layout = plan_layer_pipeline(graph, t, samples);
    if (layout->fits) {
      mode = ExecutionMode::Pipelined;
      std::ostringstream os;
      os << "every layer fits the wafer at once: " << layout->kernels.size() << " regions on "
         << layout->pes_used << " of " << layout->pes_total << " PEs";
      why = os.str();
    } else {
      std::ostringstream os;
      os << "pipelined execution would need " << layout->pes_needed << " PEs of the "
         << layout->pes_total << " the wafer has";
      why = os.str();
      layout.reset();
    }
  }
  if (!update_program) {
    std::lock_guard<std::mutex> lock(mu_);
    last_step_mode_ = mode;
  }

  auto model = std::make_shared<const WseModel>(t, mode);
  if (mode == ExecutionMode::WeightStreaming) {
    // Weights, optimizer state and gradient accumulators live in MemoryX.
    ir::Graph g = graph;
    for (auto v : g.states) g.values[static_cast<size_t>(v)].offchip = true;
    return std::make_unique<CsxExecutable>(emu::compile(g, model, co), mode, why, std::nullopt);
  }
  // Pipelined: the core's program computes the values; the layout decides fit and time.
  co.allow_out_of_memory = true;
  return std::make_unique<CsxExecutable>(emu::compile(graph, model, co), mode, why,
                                         std::move(layout));
}

IPUML_INLINE const CsxExecutable& csx_executable(const backend::Executable& exe) {
  const auto* c = dynamic_cast<const CsxExecutable*>(&exe);
  IPUML_CHECK(c != nullptr, "cerebras: this program was not compiled by the cerebras backend");
  return *c;
}

}  // namespace ipuml::cerebras
