// The emulator core's compiled program as a backend::Executable: any target's backend wraps
// emu::compile's result in it (the device's, tests/unit/test_emu_toy_target.cpp's mesh).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/emu/executor.hpp>

namespace ipuml::emu {

// A compiled program of the emulator core behind the backend interface, with its profiling
// (reports, modelled time, memory fit) from the plan and the target model: what a target's
// backend returns from compile(). The members are defined in backend_executable_impl.hpp,
// compiled once: the first of them is each
// class's key function, so the virtual tables (and every member they reach) are compiled there
// too instead of in each unit that registers the backend.
class BackendExecutable : public backend::Executable, public backend::Profiling {
 public:
  // The executable writes its own reports (ExecOptions::report_dir, program_name).
  BackendExecutable(std::unique_ptr<emu::Executable> exe, bool pipelined);
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& states,
                          uint64_t step) override;
  std::vector<std::vector<Tensor>> run_many(const std::vector<backend::RunItem>& items) override;
  const backend::Profiling* profiling() const override { return this; }
  std::string report_json() const override;
  void print_summary(std::ostream& os, double samples_per_step) const override;
  double simulated_seconds() const override;
  double simulated_seconds_for(int64_t micro_batches) const override;
  double allreduce_seconds(size_t bytes, int64_t replicas) const override;
  backend::MemoryFit memory_fit() const override;
  backend::TimeSplit time_split() const override;
  double clock_hz() const override;
  std::string target_description() const override;
  bool pipelined() const { return pipelined_; }
  std::unique_ptr<backend::Executable> replica() const override;
  void set_host_threads(int threads) override;
  void share_memory_image(backend::Executable& update, const std::vector<bool>& shared,
                          bool allow_out_of_memory) override;
  emu::Executable& program() { return *exe_; }
  const emu::Executable& program() const { return *exe_; }

 private:
  std::unique_ptr<emu::Executable> exe_;
  bool pipelined_ = false;
};

}  // namespace ipuml::emu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/emu/backend_executable_impl.hpp>
#endif
