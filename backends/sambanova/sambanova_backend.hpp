// The SambaNova RDU behind the backend interface: cuts the step into sections (o0 or o1) on the
// tiles the program holds, compiles it through the emulator core (which computes its values),
// and profiles runs from the section plan (backend::Profiling). Replicas are data-parallel
// instances, each on its own tiles.
#pragma once

#include <memory>
#include <string>

#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/emu/backend_executable.hpp>
#include <ipuml/backends/sambanova/rdu_model.hpp>
#include <ipuml/backends/sambanova/sections.hpp>
#include <ipuml/backends/sambanova/target.hpp>

namespace ipuml::sambanova {

// A program compiled for an RDU: the core's program and the section plan that sets its time and
// whether it fits.
class RduExecutable : public emu::BackendExecutable {
 public:
  RduExecutable(std::unique_ptr<emu::Executable> exe, SectionPlan plan);
  const SectionPlan& sections() const { return plan_; }

  backend::MemoryFit memory_fit() const override;
  std::string target_description() const override;
  void print_summary(std::ostream& os, double samples_per_step) const override;
  // The update's optimizer state is kept in DDR beside the weights: the plan is made again
  // with it.
  void share_memory_image(backend::Executable& update, const std::vector<bool>& shared,
                          bool allow_out_of_memory) override;

 private:
  void adopt_plan();
  SectionPlan plan_;
};

class SambanovaBackend : public backend::Backend {
 public:
  std::string name() const override { return "sambanova"; }
  std::vector<backend::DeviceInfo> devices() const override;
  bool supports(ir::OpKind) const override { return true; }

  // Options: "target" (sn30, sn10, tiny), "target_overrides" ("field=value;..."), "num_tiles"
  // (tiles one instance holds; default the whole RDU), "optimization" (o0, o1; default o1).
  // The program's replicas are its data-parallel instances (--data-parallel -ws N).
  using backend::Backend::compile;
  std::unique_ptr<backend::Executable> compile(
      const ir::Graph& graph, const backend::ProgramOptions& program,
      const backend::CompileOptions& options) const override;
};

IPUML_REGISTER_BACKEND(SambanovaBackend);

// The parameters of a program compiled by the SambaNova backend; throws ipuml::Error otherwise.
const RduExecutable& rdu_executable(const backend::Executable& exe);

}  // namespace ipuml::sambanova

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/sambanova/sambanova_backend_impl.hpp>
#endif
