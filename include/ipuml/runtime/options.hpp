// PopTorch-style execution options: device iterations, replication, gradient accumulation,
// output mode, seed, memory proportion, executable caching and the emulated target.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ipuml/core/dtype.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/dist/communicator.hpp>

namespace ipuml::runtime {

enum class OutputMode { All, Sum, Final, EveryN, Default };

inline const char* output_mode_name(OutputMode m) {
  switch (m) {
    case OutputMode::All:
      return "All";
    case OutputMode::Sum:
      return "Sum";
    case OutputMode::Final:
      return "Final";
    case OutputMode::EveryN:
      return "EveryN";
    case OutputMode::Default:
      return "Default";
  }
  return "?";
}

enum class ExecutionStrategy { Sharded, Pipelined };

// `opts.Training.gradientAccumulation(8)` as in PopTorch.
struct TrainingOptions {
  int64_t gradient_accumulation = 1;
  TrainingOptions& gradientAccumulation(int64_t n) {
    IPUML_CHECK(n >= 1, "Options.Training.gradientAccumulation: must be >= 1, got ", n);
    gradient_accumulation = n;
    return *this;
  }
};

// `opts.Precision.setPartialsType(kFloat16)` as in PopTorch: the type of matrix ops' partial
// sums on the IPU (float by default; half halves their temporaries, "16.16" precision).
struct PrecisionOptions {
  DType partials_type = DType::Float32;
  PrecisionOptions& setPartialsType(DType t) {
    IPUML_CHECK(t == DType::Float32 || t == DType::Float16,
                "Options.Precision.setPartialsType: expected float32 or float16, got ",
                dtype_name(t));
    partials_type = t;
    return *this;
  }
  // PopTorch's Precision.enableStochasticRounding: on the emulated IPU every float16/bfloat16
  // result of an arithmetic op or cast is rounded stochastically (unbiased on average) from
  // counter-based random bits seeded by randomSeed, so runs stay bit-reproducible.
  bool stochastic_rounding = false;
  PrecisionOptions& enableStochasticRounding(bool on) {
    stochastic_rounding = on;
    return *this;
  }
};

// Where a kind of tensor lives, as PopTorch's TensorLocationSettings: on the tiles (the
// default) or in streaming memory, off-chip DRAM reached by explicit copies.
struct TensorLocationSettings {
  bool on_chip = true;
  bool replicated_tensor_sharding = false;
  TensorLocationSettings& useOnChipStorage(bool on) {
    on_chip = on;
    return *this;
  }
  // Replicated tensor sharding: with R > 1 replicas each holds and updates 1/R of the tensors
  // (on the tiles or in streaming memory), the all-reduce of the gradients becoming a
  // reduce-scatter before the update and an all-gather of the new weights after it (the same
  // bytes over the links). The numbers computed do not change; the memory and cycles do.
  TensorLocationSettings& useReplicatedTensorSharding(bool on) {
    replicated_tensor_sharding = on;
    return *this;
  }
};

// `opts.TensorLocations.setOptimizerLocation(TensorLocationSettings().useOnChipStorage(false))`
// keeps optimizer state (momentum, Adam's moments) in streaming memory, as train_gpt2.py's
// optimizer_state_offchip: off the tiles except while the weight update reads it, at the cost
// of streaming it in and out every update.
struct TensorLocationOptions {
  TensorLocationSettings optimizer;
  TensorLocationOptions& setOptimizerLocation(const TensorLocationSettings& s) {
    optimizer = s;
    return *this;
  }
};

// `opts.Distributed.setCommunicator(dist::world())`: this process is one instance of a
// data-parallel job (poprun's role, popdist's configureProcessId). replicationFactor stays the
// instance's local replicas; gradients are summed over every instance's replicas (in rank order)
// before the identical weight update on every instance.
struct DistributedOptions {
  std::shared_ptr<dist::Communicator> communicator;
  DistributedOptions& setCommunicator(std::shared_ptr<dist::Communicator> c) {
    communicator = std::move(c);
    return *this;
  }
  int64_t num_processes() const { return communicator ? communicator->size() : 1; }
  int64_t process_id() const { return communicator ? communicator->rank() : 0; }
};

class Options {
 public:
  TrainingOptions Training;
  PrecisionOptions Precision;
  TensorLocationOptions TensorLocations;
  DistributedOptions Distributed;

  Options& deviceIterations(int64_t n) {
    IPUML_CHECK(n >= 1, "Options.deviceIterations: must be >= 1, got ", n);
    device_iterations_ = n;
    return *this;
  }
  Options& replicationFactor(int64_t n) {
    IPUML_CHECK(n >= 1, "Options.replicationFactor: must be >= 1, got ", n);
    replication_factor_ = n;
    return *this;
  }
  Options& gradientAccumulation(int64_t n) {
    Training.gradientAccumulation(n);
    return *this;
  }
  // How many replicas the host runs at the same time (each replica's IPUs are their own thread
  // arenas; replicas share the host's cores). 0, the default: as many as the host has cores.
  // 1: one after another. The results are the same bits either way.
  Options& hostReplicaThreads(int64_t n) {
    IPUML_CHECK(n >= 0, "Options.hostReplicaThreads: must be >= 0 (0: one per host core), got ", n);
    host_replica_threads_ = n;
    return *this;
  }
  Options& outputMode(OutputMode m, int64_t every_n = 1) {
    IPUML_CHECK(m != OutputMode::EveryN || every_n >= 1,
                "Options.outputMode: EveryN needs N >= 1, got ", every_n);
    output_mode_ = m;
    output_every_n_ = every_n;
    return *this;
  }
  Options& randomSeed(uint64_t seed) {
    seed_ = seed;
    has_seed_ = true;
    return *this;
  }
  // Options of one backend, by its name, as text: passed to that backend's compile only, which
  // parses them and refuses keys it does not know (README: adding a backend). PopTorch's IPU
  // setters below are this for "ipu".
  Options& backendOption(const std::string& backend, const std::string& key,
                         const std::string& value) {
    IPUML_CHECK(!backend.empty() && !key.empty(),
                "Options.backendOption: expected a backend name and a key, got \"", backend,
                "\" and \"", key, "\"");
    backend_options_[backend][key] = value;
    return *this;
  }
  // The options set for `backend` (empty when none).
  const std::map<std::string, std::string>& backend_options(const std::string& backend) const {
    static const std::map<std::string, std::string> none;
    auto it = backend_options_.find(backend);
    return it == backend_options_.end() ? none : it->second;
  }

  // IPU: the fraction of a tile's memory an op's temporaries may use (availableMemoryProportion).
  Options& setAvailableMemoryProportion(double p) {
    IPUML_CHECK(p > 0.0 && p <= 1.0,
                "Options.setAvailableMemoryProportion: must be in (0, 1], got ", p);
    return backendOption("ipu", "available_memory_proportion", exact(p));
  }
  // Per IPU, as PopTorch's setAvailableMemoryProportion({"IPU0": 0.15, "IPU1": 0.2}).
  Options& setAvailableMemoryProportion(const std::map<std::string, double>& per_ipu) {
    std::vector<double> v;
    for (auto& [key, p] : per_ipu) {
      IPUML_CHECK(key.size() > 3 && key.rfind("IPU", 0) == 0 &&
                      key.find_first_not_of("0123456789", 3) == std::string::npos && key.size() < 8,
                  "Options.setAvailableMemoryProportion: keys are \"IPU0\", \"IPU1\", ...; got \"",
                  key, "\"");
      IPUML_CHECK(p > 0.0 && p <= 1.0, "Options.setAvailableMemoryProportion: ", key,
                  " must be in (0, 1], got ", p);
      const auto i = static_cast<size_t>(std::stoul(key.substr(3)));
      if (v.size() <= i) v.resize(i + 1, 0.0);
      v[i] = p;
    }
    std::string list;
    // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false positive) on
    // `"," + std::string` once this function is inlined into a caller.
    for (double p : v) {
      if (!list.empty()) list += ',';
      list += exact(p);
    }
    return backendOption("ipu", "available_memory_proportion_per_ipu", list);
  }
  Options& enableExecutableCaching(const std::string& dir) {
    cache_dir_ = dir;
    return *this;
  }
  Options& setExecutionStrategy(ExecutionStrategy s) {
    strategy_ = s;
    return *this;
  }
  // IPU: the emulated target preset ("ipu1", "ipu2", "bow", "tiny") and field overrides
  // (docs/targets.md), checked by the backend when it compiles.
  Options& target(const std::string& name) { return backendOption("ipu", "target", name); }
  Options& setTargetOption(const std::string& field, const std::string& value) {
    IPUML_CHECK(
        field.find_first_of("=;") == std::string::npos && value.find(';') == std::string::npos,
        "Options.setTargetOption: a field name has no '=' or ';' and a value no ';', got \"", field,
        "\" = \"", value, "\"");
    std::string& all = backend_options_["ipu"]["target_overrides"];
    all += (all.empty() ? "" : ";") + field + "=" + value;
    return *this;
  }
  // The registered backend that compiles and runs the programs: "ipu" (the emulator, the
  // default), "cpu" (the planned-buffer executor) or any other registered one.
  Options& backend(const std::string& name) {
    IPUML_CHECK(!name.empty(),
                "Options.backend: expected a backend name such as \"ipu\" or \"cpu\"");
    backend_ = name;
    return *this;
  }
  // PopTorch's spelling: true is backend("ipu"), false backend("cpu").
  Options& useIpuModel(bool on) { return backend(on ? "ipu" : "cpu"); }
  Options& allowOutOfMemory(bool on) {
    allow_oom_ = on;
    return *this;
  }
  // Compile only (Graphcore's examples' --compile-only, PopTorch's offline target): the model
  // traces and compiles when called or compiled, a model that does not fit is reported rather
  // than refused, and estimate() gives its fit and projected throughput; running it is an error.
  Options& compileOnly(bool on) {
    compile_only_ = on;
    return *this;
  }
  // Writes the profile reports (as IPUML_ENGINE_OPTIONS autoReport.directory does), one
  // subdirectory per compiled program: training, weight_update, inference (docs/profile-report.md).
  Options& autoReportDirectory(const std::string& dir) {
    report_dir_ = dir;
    return *this;
  }
  // PopTorch's modelName: names the programs in reports (<name> for the training step or the
  // inference program, <name>_weight_update for a separate optimizer program).
  Options& modelName(const std::string& name) {
    model_name_ = name;
    return *this;
  }
  Options& showCompilationProgressBar(bool on) {
    progress_ = on;
    return *this;
  }

  int64_t device_iterations() const { return device_iterations_; }
  int64_t replication_factor() const { return replication_factor_; }
  int64_t gradient_accumulation() const { return Training.gradient_accumulation; }
  int64_t host_replica_threads() const { return host_replica_threads_; }
  OutputMode output_mode() const { return output_mode_; }
  int64_t output_every_n() const { return output_every_n_; }
  bool has_seed() const { return has_seed_; }
  uint64_t seed() const { return seed_; }
  // The cache directory: enableExecutableCaching, else $IPUML_CACHE_DIR, else none.
  std::string cache_dir() const {
    if (!cache_dir_.empty()) return cache_dir_;
    const char* env = std::getenv("IPUML_CACHE_DIR");
    return env ? env : "";
  }
  ExecutionStrategy execution_strategy() const { return strategy_; }
  const std::string& backend_name() const { return backend_; }
  bool use_ipu_model() const { return backend_ == "ipu"; }
  bool allow_out_of_memory() const { return allow_oom_; }
  bool compile_only() const { return compile_only_; }
  const std::string& report_dir() const { return report_dir_; }
  const std::string& model_name() const { return model_name_; }
  bool progress() const { return progress_; }

  // Samples one call of a training model consumes for micro-batch B:
  // B x deviceIterations x replicationFactor x gradientAccumulation.
  int64_t combined_batch(int64_t micro_batch, bool training = true) const {
    return micro_batch * device_iterations_ * replication_factor_ *
           (training ? Training.gradient_accumulation : 1);
  }

 private:
  int64_t device_iterations_ = 1;
  int64_t replication_factor_ = 1;
  int64_t host_replica_threads_ = 0;
  OutputMode output_mode_ = OutputMode::Default;
  int64_t output_every_n_ = 1;
  uint64_t seed_ = 0;
  bool has_seed_ = false;
  std::string cache_dir_;
  ExecutionStrategy strategy_ = ExecutionStrategy::Sharded;
  std::string backend_ = "ipu";
  bool allow_oom_ = false;
  bool compile_only_ = false;
  std::string report_dir_;
  std::string model_name_;
  bool progress_ = true;
  std::map<std::string, std::map<std::string, std::string>> backend_options_;

  // A double as text that parses back to the same value.
  static std::string exact(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
  }
};

}  // namespace ipuml::runtime

namespace ipuml {
using runtime::Options;
using runtime::OutputMode;
using runtime::TensorLocationSettings;
}  // namespace ipuml
