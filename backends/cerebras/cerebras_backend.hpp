// The Cerebras CS-2 behind the backend interface: picks the execution mode (pipelined on one
// CS-2 when every layer fits the wafer at once, else weight streaming, the only mode across
// several CS-2s), compiles through the emulator core, and profiles runs (backend::Profiling).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/cerebras/layer_pipeline.hpp>
#include <ipuml/backends/cerebras/target.hpp>
#include <ipuml/backends/cerebras/wse_model.hpp>
#include <ipuml/backends/emu/backend_executable.hpp>

namespace ipuml::cerebras {

// A program compiled for a CS-2: the core's program (which computes the values, and in weight
// streaming also the time) and, in pipelined execution, the layout of its layers on the wafer,
// which sets its time and whether it fits.
class CsxExecutable : public emu::BackendExecutable {
 public:
  CsxExecutable(std::unique_ptr<emu::Executable> exe, ExecutionMode mode, std::string why,
                std::optional<PipelineLayout> layout);
  ExecutionMode mode() const { return mode_; }
  // Why this mode: what the user asked for, or what made the choice.
  const std::string& why() const { return why_; }
  const std::optional<PipelineLayout>& layout() const { return layout_; }

  backend::MemoryFit memory_fit() const override;
  std::string target_description() const override;
  void print_summary(std::ostream& os, double samples_per_step) const override;
  // Pipelined: the update's optimizer state is kept on the wafer beside the weights, so the
  // layout is made again with it.
  void share_memory_image(backend::Executable& update, const std::vector<bool>& shared,
                          bool allow_out_of_memory) override;

 private:
  ExecutionMode mode_;
  std::string why_;
  std::optional<PipelineLayout> layout_;
};

class CerebrasBackend : public backend::Backend {
 public:
  std::string name() const override { return "cerebras"; }
  std::vector<backend::DeviceInfo> devices() const override;
  bool supports(ir::OpKind) const override { return true; }

  // Options: "target" (wse2, wse1, tiny), "target_overrides" ("field=value;..."),
  // "execution_strategy" (auto, pipeline, weight_streaming). The program's replicas are the
  // CS-2s (num_csx), each running one wafer of the data-parallel step.
  using backend::Backend::compile;
  std::unique_ptr<backend::Executable> compile(
      const ir::Graph& graph, const backend::ProgramOptions& program,
      const backend::CompileOptions& options) const override;

 private:
  // The mode of the last step program, which its weight-update program (compiled right after
  // it) follows.
  mutable std::mutex mu_;
  mutable std::optional<ExecutionMode> last_step_mode_;
};

IPUML_REGISTER_BACKEND(CerebrasBackend);

// The parameters of a program compiled by the Cerebras backend; throws ipuml::Error otherwise.
const CsxExecutable& csx_executable(const backend::Executable& exe);

}  // namespace ipuml::cerebras

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cerebras/cerebras_backend_impl.hpp>
#endif
