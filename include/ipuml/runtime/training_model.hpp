// trainingModel / inferenceModel: PopTorch's execution model. The first call traces one step
// (forward, loss, backward, update) into graphs, compiles them for the chosen backend, and
// later calls stream host batches through them: deviceIterations updates per call, each over
// replicationFactor x gradientAccumulation micro-batches, gradients averaged across replicas
// (and across instances, with Options.Distributed).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <ipuml/backend/backend.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/optim/optimizer.hpp>
#include <ipuml/runtime/estimate.hpp>
#include <ipuml/runtime/options.hpp>

namespace ipuml::runtime {

using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;
// Models with several inputs or outputs (BERT: ids, token types, mask; MLM and NSP logits), as
// PopTorch's wrapped models take them: the forward pass maps the input tensors to the outputs,
// and the loss maps (outputs..., targets...) to a scalar.
using Tensors = std::vector<Tensor>;
using ForwardFn = std::function<Tensors(const Tensors& inputs)>;
using MultiLossFn = std::function<Tensor(const Tensors& outputs, const Tensors& targets)>;

// Timing of the last call: wall clock, and the emulated device's simulated time when the
// backend models one.
struct RunStats {
  int64_t samples = 0;
  double wall_seconds = 0;
  std::optional<double> simulated_seconds;
  double wall_samples_per_second() const { return wall_seconds > 0 ? samples / wall_seconds : 0; }
  std::optional<double> simulated_samples_per_second() const {
    if (!simulated_seconds || *simulated_seconds <= 0) return std::nullopt;
    return samples / *simulated_seconds;
  }
};

namespace detail {
// The backend the Options select, the program options they give, and a compile with both.
std::string backend_for(const Options& o);
backend::ProgramOptions program_options_for(const Options& o, int64_t devices, bool training,
                                            const std::string& program);
std::unique_ptr<backend::Executable> compile_program(const Options& o, const ir::Graph& graph,
                                                     const backend::ProgramOptions& program);
int64_t ipus_used(const ir::Graph& g);

// A oneTBB arena, defined in runtime/training_model_impl.hpp so that oneTBB's headers stay out
// of every unit that includes this one.
struct LaneArena;
// Further instances of a compiled program for replicas the host runs at the same time (lane l
// runs replicas l, l + lanes, ...), and one oneTBB arena per lane, the primary's first, each of
// its share of the host's cores (made once, with the lanes). shared_ptr, as it deletes the
// arena it was given without needing the type complete here.
struct ReplicaLanes {
  std::vector<std::unique_ptr<backend::Executable>> others;
  std::vector<std::shared_ptr<LaneArena>> arenas;
  size_t size() const { return others.size() + 1; }
};
}  // namespace detail

class TrainingModel {
 public:
  TrainingModel(std::shared_ptr<nn::Module> model, Options options, optim::Optimizer& optimizer,
                LossFn loss);
  // Any number of inputs and targets: `forward` runs the model (its parameters are the
  // model's), `loss` reduces (outputs, targets) to a scalar. Every input and target is batched
  // along dim 0 with the same number of rows.
  TrainingModel(std::shared_ptr<nn::Module> model, Options options, optim::Optimizer& optimizer,
                ForwardFn forward, MultiLossFn loss);

  // Consumes one combined batch (micro x deviceIterations x replicationFactor x
  // gradientAccumulation rows, laid out [deviceIteration][accumulationStep][replica][micro])
  // and returns the losses the output mode asks for: All -> one per micro-batch, Sum -> their
  // sum, Final -> the losses of the last device iteration, EveryN -> every N-th iteration's.
  Tensor operator()(const Tensor& data, const Tensor& labels);
  // The same for several input and target tensors, each laid out as above.
  Tensor operator()(const Tensors& inputs, const Tensors& targets);

  bool is_compiled() const { return compiled_; }
  // Traces and compiles for batches shaped like these (the first call does it implicitly).
  void compile(const Tensor& data, const Tensor& labels);
  void compile(const Tensors& inputs, const Tensors& targets);
  // Compiles (if not yet) for batches shaped like these and says, without executing a kernel,
  // whether the model fits and how fast the whole configuration would run: the modelled time of
  // one call equals what running it reports. A model that does not fit is reported, not
  // refused; running it afterwards throws the out-of-memory error unless allowOutOfMemory.
  // Throws for a backend that models no device (the CPU).
  Estimate estimate(const Tensor& data, const Tensor& labels);
  Estimate estimate(const Tensors& inputs, const Tensors& targets);

  // Weights live in the same host tensors the device graphs are bound to, so host and device
  // copies are always in sync; these exist for PopTorch parity and are cheap no-ops.
  void copyWeightsToHost() {}
  void copyWeightsToDevice() {}

  const Options& options() const { return options_; }
  int64_t micro_batch() const { return micro_batch_; }
  const RunStats& last_stats() const { return stats_; }
  // The backend's report of the micro-step graph (memory, cycles) as JSON text, and the
  // terminal summary of every program of a run (PopTorch's printProfileSummary): the
  // micro-batch step, the weight update, and the whole configuration (accumulation, replicas,
  // device iterations, the gradient all-reduce), each throughput line saying what it counts.
  // Nothing for a backend that models no device.
  std::string report_json() const;
  void printProfileSummary(std::ostream& os) const;
  const ir::Graph& step_graph() const { return step_trace_.graph; }
  // The compiled micro-step (null before the first call), for backend-specific inspection.
  const backend::Executable* step_executable() const { return step_exe_.get(); }
  // Device runs so far: what varies the random ops (dropout masks) of each run. Saved with a
  // checkpoint and restored before the first call, a resumed run draws the same masks as an
  // uninterrupted one.
  uint64_t run_counter() const { return run_counter_; }
  // Gradient all-reduces charged so far: one per weight update with more than one replica.
  int64_t allreduce_count() const { return allreduces_; }
  // Replicas the host runs at the same time (Options.hostReplicaThreads; 1 before compiling,
  // without replicas, or where the backend cannot run two instances of a program).
  int64_t host_replica_lanes() const { return static_cast<int64_t>(lanes_.size()); }
  void set_run_counter(uint64_t runs) { run_counter_ = runs; }

 private:
  std::shared_ptr<nn::Module> model_;
  Options options_;
  optim::Optimizer& optimizer_;
  ForwardFn forward_;
  MultiLossFn loss_;
  bool compiled_ = false;
  int64_t micro_batch_ = 0;
  std::vector<Shape> input_shapes_, target_shapes_;
  std::vector<std::vector<Tensor>> accumulators_;  // [replica][param]
  ir::Trace step_trace_, update_trace_;
  std::vector<std::vector<Tensor>> step_states_;  // per replica
  std::unique_ptr<backend::Executable> step_exe_, update_exe_;
  // Further instances of the step for replicas run at the same time (detail::run_replicas).
  detail::ReplicaLanes lanes_;
  uint64_t run_counter_ = 0;
  size_t gradient_bytes_ = 0;
  int64_t allreduces_ = 0;
  RunStats stats_;
  std::vector<float> allreduce_buffer_;
  double compile_wall_seconds_ = 0;
  std::string oom_message_;  // compiled to report a model that does not fit; running throws it
  void compile_impl(const Tensors& inputs, const Tensors& targets, bool report_oom);
  void check_shapes(const Tensors& inputs, const Tensors& targets) const;
  // The modelled seconds of one weight update's parts (the step over its micro-batches, the
  // update program, the all-reduce) into `e`; false where a program models no device.
  bool modelled_iteration(Estimate& e) const;
  // The whole configuration's estimate from the compiled programs; false without a device model.
  bool configuration(Estimate& e) const;
  void reduce_replicas();
  void allreduce_accumulators();
};

class InferenceModel {
 public:
  InferenceModel(std::shared_ptr<nn::Module> model, Options options);
  // Any number of inputs and outputs, batched along dim 0 (see TrainingModel).
  InferenceModel(std::shared_ptr<nn::Module> model, Options options, ForwardFn forward);
  // Consumes micro x deviceIterations x replicationFactor rows; returns the outputs the mode
  // asks for (All by default: every row's output, in input order).
  // A batch with fewer rows than the compiled one (a data set's last batch) is padded with
  // zero rows and the outputs for the padding dropped (OutputMode::All), so every sample is
  // evaluated; rows must be independent in eval mode, as they are for inference.
  Tensor operator()(const Tensor& data);
  // Every output, each selected by the output mode as the single-output call selects its one.
  Tensors operator()(const Tensors& inputs);
  bool is_compiled() const { return compiled_; }
  void compile(const Tensor& data);
  void compile(const Tensors& inputs);
  // As TrainingModel::estimate: fit and projected throughput without executing a kernel.
  Estimate estimate(const Tensor& data);
  Estimate estimate(const Tensors& inputs);
  const RunStats& last_stats() const { return stats_; }
  // Replicas the host runs at the same time (see TrainingModel::host_replica_lanes).
  int64_t host_replica_lanes() const { return static_cast<int64_t>(lanes_.size()); }
  std::string report_json() const;
  void printProfileSummary(std::ostream& os) const {
    if (auto* p = exe_ ? exe_->profiling() : nullptr)
      p->print_summary(os, static_cast<double>(micro_batch_));
  }

 private:
  std::shared_ptr<nn::Module> model_;
  Options options_;
  ForwardFn forward_;
  bool compiled_ = false;
  int64_t micro_batch_ = 0;
  std::vector<Shape> input_shapes_;
  size_t num_outputs_ = 1;
  ir::Trace trace_;
  std::unique_ptr<backend::Executable> exe_;
  detail::ReplicaLanes lanes_;  // further replicas' instances
  uint64_t run_counter_ = 0;
  RunStats stats_;
  double compile_wall_seconds_ = 0;
  std::string oom_message_;
  void compile_impl(const Tensors& inputs, bool report_oom);
};

// PopTorch spelling: poptorch.trainingModel(model, options, optimizer) with the loss given
// explicitly (PopTorch folds it into the model's forward).
inline TrainingModel trainingModel(std::shared_ptr<nn::Module> model, const Options& options,
                                   optim::Optimizer& optimizer, LossFn loss) {
  return TrainingModel(std::move(model), options, optimizer, std::move(loss));
}
inline TrainingModel trainingModel(std::shared_ptr<nn::Module> model, const Options& options,
                                   optim::Optimizer& optimizer, ForwardFn forward,
                                   MultiLossFn loss) {
  return TrainingModel(std::move(model), options, optimizer, std::move(forward), std::move(loss));
}
inline InferenceModel inferenceModel(std::shared_ptr<nn::Module> model, const Options& options) {
  return InferenceModel(std::move(model), options);
}
inline InferenceModel inferenceModel(std::shared_ptr<nn::Module> model, const Options& options,
                                     ForwardFn forward) {
  return InferenceModel(std::move(model), options, std::move(forward));
}

}  // namespace ipuml::runtime

namespace ipuml {
using runtime::inferenceModel;
using runtime::trainingModel;
}  // namespace ipuml

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/runtime/training_model_impl.hpp>
#endif
