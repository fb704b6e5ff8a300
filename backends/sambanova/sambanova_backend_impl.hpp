// Bodies of the SambaNova backend and its executable (compiled once in
// src/lib/sambanova_backend.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <ipuml/backends/emu/backend_options.hpp>
#include <ipuml/backends/emu/executor.hpp>
#include <ipuml/backends/emu/profile.hpp>
#include <ipuml/backends/emu/target_fields.hpp>
#include <ipuml/backends/sambanova/sambanova_backend.hpp>

namespace ipuml::sambanova {

IPUML_INLINE RduExecutable::RduExecutable(std::unique_ptr<emu::Executable> exe, SectionPlan plan)
    : emu::BackendExecutable(std::move(exe), false), plan_(std::move(plan)) {
  adopt_plan();
}

// The plan's time as the program's cycles: the sections' compute (or DDR, where it is longer)
// as compute, their loading as sync; the host's streams as the core counted them. sections.json
// goes beside the program's profile.json when reports are on.
IPUML_INLINE void RduExecutable::adopt_plan() {
  emu::RunCycles c;
  c.per_device.assign(1, emu::DeviceCycles{});
  auto& d = c.per_device[0];
  for (const Section& s : plan_.sections) {
    d.compute += std::max(s.compute_cycles, s.ddr_cycles);
    d.sync += s.switch_cycles;
  }
  for (auto& pd : program().plan().cycles.per_device) d.host += pd.host;
  c.total = d.total();
  c.simulated_seconds = c.total / program().machine().clock_hz;
  program().set_cycles(c);
  const std::string& dir = program().report_directory();
  if (!dir.empty()) emu::write_report_file(dir, "sections.json", sections_json(plan_));
}

IPUML_INLINE backend::MemoryFit RduExecutable::memory_fit() const {
  backend::MemoryFit f;
  f.device = "RDU";
  f.unit = "PMU";
  const Target& t = rdu_model_of(program().model()).target();
  f.unit_bytes = t.pmu_bytes;
  int64_t fullest = 0;
  for (const Section& s : plan_.sections)
    for (const SectionOp& op : s.ops)
      if (op.pmus > 0)
        fullest = std::max(fullest, static_cast<int64_t>(std::ceil(
                                        std::min(op.resident_bytes / static_cast<double>(op.pmus),
                                                 static_cast<double>(t.pmu_bytes)))));
  f.fullest_unit.push_back(fullest);
  f.device_bytes.push_back(static_cast<int64_t>(plan_.ddr_peak_bytes));
  f.categories.emplace_back("ddr_weights_optimizer_state", static_cast<int64_t>(plan_.state_bytes));
  f.categories.emplace_back("ddr_between_sections",
                            static_cast<int64_t>(plan_.ddr_peak_bytes - plan_.state_bytes));
  f.fits = plan_.fits;
  f.message = plan_.message;
  return f;
}

IPUML_INLINE std::string RduExecutable::target_description() const {
  return emu::BackendExecutable::target_description() + " (" +
         std::to_string(plan_.sections.size()) + " sections)";
}

IPUML_INLINE void RduExecutable::print_summary(std::ostream& os, double samples_per_step) const {
  emu::BackendExecutable::print_summary(os, samples_per_step);
  os << describe(plan_);
}

IPUML_INLINE void RduExecutable::share_memory_image(backend::Executable& update,
                                                    const std::vector<bool>& shared,
                                                    bool allow_out_of_memory) {
  auto* u = dynamic_cast<RduExecutable*>(&update);
  IPUML_CHECK(u != nullptr, "sambanova backend: the weight update was compiled by another backend");
  const ir::Graph& ug = u->program().graph();
  double extra = 0;
  for (size_t i = 0; i < ug.states.size() && i < shared.size(); ++i)
    if (!shared[i])
      extra += static_cast<double>(ug.values[static_cast<size_t>(ug.states[i])].meta.nbytes());
  plan_ = plan_sections(program().graph(), rdu_model_of(program().model()), extra);
  adopt_plan();
  if (!plan_.fits && !allow_out_of_memory) fail("sambanova backend: ", plan_.message);
}

IPUML_INLINE std::vector<backend::DeviceInfo> SambanovaBackend::devices() const {
  const Target t = target_preset("sn30");
  backend::DeviceInfo d;
  d.name = "RDU (" + t.name + ")";
  d.memory_bytes = static_cast<size_t>(t.ddr_bytes);
  d.compute_units = static_cast<int>(t.pcus_per_rdu());
  d.description = to_string(t);
  return {d};
}

IPUML_INLINE std::unique_ptr<backend::Executable> SambanovaBackend::compile(
    const ir::Graph& graph, const backend::ProgramOptions& program,
    const backend::CompileOptions& options) const {
  emu::OptionTaker o(options);
  Target t = target_preset(o.take("target", "sn30"));
  emu::for_each_override(o.take("target_overrides", ""),
                         [&](const std::string& item) { apply_override(t, item); });
  const std::string tiles_text = o.take("num_tiles", std::to_string(t.tiles_per_rdu));
  char* end = nullptr;
  const long long parsed = std::strtoll(tiles_text.c_str(), &end, 10);
  IPUML_CHECK(
      !tiles_text.empty() && end && *end == '\0' && parsed >= 1 && parsed <= t.tiles_per_rdu,
      "sambanova backend: num_tiles must be a whole number of tiles in [1, ", t.tiles_per_rdu,
      "] (the tiles of one ", t.name, " RDU), got '", emu::fields::printable(tiles_text), "'");
  const auto tiles = static_cast<int64_t>(parsed);
  const std::string opt = o.take("optimization", "o1");
  IPUML_CHECK(opt == "o0" || opt == "o1", "sambanova backend: optimization must be o0 or o1, got '",
              emu::fields::printable(opt), "'");
  for (auto& [k, v] : o.rest())
    fail("sambanova backend: unknown compile option '", emu::fields::printable(k),
         "' (expected target, target_overrides, num_tiles or optimization)");
  IPUML_CHECK(program.devices_per_replica == 1,
              "sambanova backend: a program runs on the tiles of one RDU, but this one is "
              "placed on ",
              program.devices_per_replica,
              " devices per replica (BeginBlock / ipu placement is for IPUs)");
  const int64_t instances_per_rdu =
      std::max<int64_t>(1, t.tiles_per_rdu / std::max<int64_t>(1, tiles));
  IPUML_CHECK(program.replicas >= 1 && program.replicas <= t.max_rdus * instances_per_rdu,
              "sambanova backend: ", program.replicas, " data-parallel instances of ", tiles,
              " tiles need more than the ", t.max_rdus, " RDUs of the system (at most ",
              t.max_rdus * instances_per_rdu, ")");

  auto model =
      std::make_shared<const RduModel>(t, tiles, opt == "o0" ? Optimization::O0 : Optimization::O1);
  SectionPlan plan = plan_sections(graph, *model);
  if (!plan.fits && !program.allow_out_of_memory) fail("sambanova backend: ", plan.message);
  emu::CompileOptions co = emu::compile_options_for(program, program.replicas);
  // The core computes the values; the section plan decides fit and time (its tensors live in
  // DDR between sections, not in the PMUs the core would place them on).
  co.allow_out_of_memory = true;
  return std::make_unique<RduExecutable>(emu::compile(graph, model, co), std::move(plan));
}

IPUML_INLINE const RduExecutable& rdu_executable(const backend::Executable& exe) {
  const auto* r = dynamic_cast<const RduExecutable*>(&exe);
  IPUML_CHECK(r != nullptr, "sambanova: this program was not compiled by the sambanova backend");
  return *r;
}

}  // namespace ipuml::sambanova
