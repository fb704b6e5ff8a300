// Bodies of the emulator's program behind the backend interface (compiled once in
// src/lib/emu_backend_executable.cpp).
#pragma once

#include <algorithm>
#include <ostream>

#include <ipuml/backends/emu/backend_executable.hpp>

namespace ipuml::emu {

IPUML_INLINE BackendExecutable::BackendExecutable(std::unique_ptr<emu::Executable> exe,
                                                  bool pipelined)
    : exe_(std::move(exe)), pipelined_(pipelined) {}

IPUML_INLINE std::vector<Tensor> BackendExecutable::run(const std::vector<Tensor>& inputs,
                                                        const std::vector<Tensor>& states,
                                                        uint64_t step) {
  return exe_->run(inputs, states, step);
}

IPUML_INLINE std::vector<std::vector<Tensor>> BackendExecutable::run_many(
    const std::vector<backend::RunItem>& items) {
  return exe_->run_many(items, pipelined_);
}

IPUML_INLINE std::string BackendExecutable::report_json() const { return exe_->profile_json(); }

IPUML_INLINE void BackendExecutable::print_summary(std::ostream& os,
                                                   double samples_per_step) const {
  exe_->print_profile_summary(os, samples_per_step);
}

IPUML_INLINE double BackendExecutable::simulated_seconds() const {
  return exe_->last_run_cycles().simulated_seconds;
}

IPUML_INLINE double BackendExecutable::simulated_seconds_for(int64_t micro_batches) const {
  return exe_->cycles_for(micro_batches, pipelined_) / exe_->machine().clock_hz;
}

IPUML_INLINE double BackendExecutable::allreduce_seconds(size_t bytes, int64_t replicas) const {
  // The program spans one replica's devices: each of them reduces its own share, side by side.
  const emu::Machine& mc = exe_->machine();
  return exe_->model().allreduce_cycles(static_cast<double>(bytes), replicas, mc.devices) /
         mc.clock_hz;
}

IPUML_INLINE backend::MemoryFit BackendExecutable::memory_fit() const {
  const Plan& p = exe_->plan();
  const MemoryReport& m = p.memory;
  const int64_t T = p.machine.units_per_device;
  backend::MemoryFit f;
  f.device = p.machine.device_noun;
  f.unit = p.machine.unit_noun;
  f.unit_bytes = p.machine.bytes_per_unit;
  for (int64_t i = 0; i < p.machine.devices; ++i) {
    int64_t fullest = 0, all = 0;
    for (int64_t k = 0; k < T; ++k) {
      const int64_t b = m.units[static_cast<size_t>(i * T + k)].total();
      fullest = std::max(fullest, b);
      all += b;
    }
    f.fullest_unit.push_back(fullest);
    f.device_bytes.push_back(all);
  }
  for (int c = 0; c < kNumCategories; ++c) {
    int64_t s = 0;
    for (auto& t : m.units) s += t.bytes[c];
    f.categories.emplace_back(category_name(p, c), s);
  }
  f.fits = !m.out_of_memory;
  if (!f.fits) f.message = out_of_memory_message(p);
  return f;
}

IPUML_INLINE backend::TimeSplit BackendExecutable::time_split() const {
  const double hz = exe_->machine().clock_hz;
  backend::TimeSplit s;
  for (const DeviceCycles& c : exe_->plan().cycles.per_device) {
    s.compute += c.compute / hz;
    s.exchange += c.exchange / hz;
    s.sync += c.sync / hz;
    s.host += c.host / hz;
  }
  return s;
}

IPUML_INLINE double BackendExecutable::clock_hz() const { return exe_->machine().clock_hz; }

IPUML_INLINE std::string BackendExecutable::target_description() const {
  return exe_->model().describe();
}

IPUML_INLINE std::unique_ptr<backend::Executable> BackendExecutable::replica() const {
  return std::make_unique<BackendExecutable>(exe_->replica(), pipelined_);
}

IPUML_INLINE void BackendExecutable::set_host_threads(int threads) {
  exe_->set_host_threads(threads);
}

IPUML_INLINE void BackendExecutable::share_memory_image(backend::Executable& update,
                                                        const std::vector<bool>& shared,
                                                        bool allow_out_of_memory) {
  auto* u = dynamic_cast<BackendExecutable*>(&update);
  IPUML_CHECK(u != nullptr, "emulator backend: the weight update was compiled by another backend");
  Plan image;
  image.model = exe_->plan().model;
  image.machine = exe_->plan().machine;
  image.target_json = exe_->plan().target_json;
  image.memory = combine_memory(exe_->plan(), u->program().graph(), u->program().plan(), shared);
  exe_->set_memory_report(image.memory);
  if (!exe_->report_directory().empty()) exe_->write_profile(exe_->report_directory());
  if (image.memory.out_of_memory && !allow_out_of_memory) fail(out_of_memory_message(image));
}

}  // namespace ipuml::emu
