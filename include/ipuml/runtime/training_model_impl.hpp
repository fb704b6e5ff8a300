// Bodies of trainingModel / inferenceModel (compiled once in compiled mode).
#pragma once

#include <algorithm>

#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <ipuml/ir/placement.hpp>
#include <ipuml/ir/recompute.hpp>
#include <ipuml/ir/stages.hpp>
#include <ipuml/runtime/training_model.hpp>

namespace ipuml::runtime {

namespace detail {

IPUML_INLINE std::string backend_for(const Options& o) {
  IPUML_CHECK(o.backend_name() != "ipu" || backend::registry().count("ipu") != 0,
              "Options.useIpuModel: the ipu backend is not registered in this program (include "
              "<ipuml/backends/ipu/ipu_backend.hpp>), or pass useIpuModel(false) for the CPU");
  backend::get_backend(o.backend_name());  // names the registered ones when it is not
  return o.backend_name();
}

// How the runtime will run a program, for the backend that compiles it. `program` names it in
// reports: "training", "weight_update" or "inference", under Options.modelName when one is given.
IPUML_INLINE backend::ProgramOptions program_options_for(const Options& o, int64_t devices,
                                                         bool training,
                                                         const std::string& program) {
  backend::ProgramOptions p;
  p.training = training;
  p.replicas = o.replication_factor();
  p.devices_per_replica = devices;
  p.pipelined = o.execution_strategy() == ExecutionStrategy::Pipelined;
  p.gradient_accumulation = o.gradient_accumulation();
  p.device_iterations = o.device_iterations();
  p.allow_out_of_memory = o.allow_out_of_memory();
  p.progress = o.progress();
  p.cache_dir = o.cache_dir();
  p.report_dir = o.report_dir();
  p.partials_type = o.Precision.partials_type;
  p.stochastic_rounding = o.Precision.stochastic_rounding;
  p.seed = o.seed();
  if (o.model_name().empty())
    p.name = program;
  else
    p.name = program == "weight_update" ? o.model_name() + "_weight_update" : o.model_name();
  return p;
}

// Compiles `graph` on the Options' backend with the program options and that backend's own.
IPUML_INLINE std::unique_ptr<backend::Executable> compile_program(
    const Options& o, const ir::Graph& graph, const backend::ProgramOptions& program) {
  const std::string name = backend_for(o);
  return backend::get_backend(name)->compile(graph, program, o.backend_options(name));
}

IPUML_INLINE int64_t ipus_used(const ir::Graph& g) {
  int64_t n = 1;
  for (auto& node : g.nodes) n = std::max<int64_t>(n, node.placement + 1);
  return n;
}

// How many replicas the host runs at once: hostReplicaThreads, or one per host core, at most
// the replicas there are.
inline int64_t replica_lanes(const Options& o) {
  int64_t t = o.host_replica_threads();
  if (t == 0) t = tbb::info::default_concurrency();
  return std::clamp<int64_t>(t, 1, o.replication_factor());
}

// Host threads each of `lanes` lanes may use: an equal share of the cores.
inline int lane_threads(size_t lanes) {
  return std::max(1,
                  tbb::info::default_concurrency() / static_cast<int>(std::max<size_t>(lanes, 1)));
}

struct LaneArena {
  explicit LaneArena(int threads) : arena(threads) {}
  tbb::task_arena arena;
};

// Further instances of `primary` for lanes 1.., every lane limited to its share of the host's
// cores; none when one lane is asked for or the backend cannot make them.
inline ReplicaLanes make_lanes(backend::Executable& primary, int64_t lanes) {
  ReplicaLanes out;
  for (int64_t l = 1; l < lanes; ++l) {
    auto e = primary.replica();
    if (!e) return {};
    out.others.push_back(std::move(e));
  }
  if (out.others.empty()) return out;
  const int threads = lane_threads(out.size());
  primary.set_host_threads(threads);
  for (auto& e : out.others) e->set_host_threads(threads);
  // Each lane runs in an arena of its share of the cores (kernels that parallelise inside
  // themselves stay within it).
  for (size_t l = 0; l < out.size(); ++l)
    out.arenas.push_back(std::make_shared<LaneArena>(threads));
  return out;
}

// Runs the items, item i belonging to replica replica_of[i], with the outputs in item order:
// each lane takes its replicas' items in order on its own instance of the program, the lanes
// at the same time. Replicas share only read-only states (the weights), so the results are the
// bits of running the items one after another.
inline std::vector<std::vector<Tensor>> run_replicas(backend::Executable& primary,
                                                     const ReplicaLanes& lanes_in,
                                                     const std::vector<backend::RunItem>& items,
                                                     const std::vector<int64_t>& replica_of) {
  const size_t lanes = lanes_in.size();
  if (lanes == 1) return primary.run_many(items);
  std::vector<std::vector<size_t>> mine(lanes);
  for (size_t i = 0; i < items.size(); ++i)
    mine[static_cast<size_t>(replica_of[i]) % lanes].push_back(i);
  std::vector<std::vector<Tensor>> out(items.size());
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, lanes, 1),
      [&](const tbb::blocked_range<size_t>& range) {
        for (size_t l = range.begin(); l != range.end(); ++l)
          lanes_in.arenas[l]->arena.execute([&] {
            std::vector<backend::RunItem> its;
            for (size_t i : mine[l]) its.push_back(items[i]);
            auto res = (l == 0 ? primary : *lanes_in.others[l - 1]).run_many(its);
            for (size_t k = 0; k < res.size(); ++k) out[mine[l][k]] = std::move(res[k]);
          });
      },
      tbb::simple_partitioner());
  return out;
}

inline bool pipelined(const Options& o, int64_t ipus) {
  return o.execution_strategy() == ExecutionStrategy::Pipelined && ipus > 1;
}

// PopTorch's rule: every stage needs a micro-batch of its own, so a pipelined training step
// accumulates at least as many micro-batches as it has stages (2N - 1 for N IPUs in order).
inline void check_pipeline(const Options& o, const ir::Graph& g, bool training) {
  const int64_t ipus = ipus_used(g);
  if (!pipelined(o, ipus)) return;
  const int64_t stages = ir::stage_count(g);
  if (training)
    IPUML_CHECK(o.gradient_accumulation() >= stages, "Options: pipelined training over ", ipus,
                " IPUs has ", stages, " stages, so gradientAccumulation must be >= ", stages,
                " (got ", o.gradient_accumulation(), ")");
  else
    IPUML_CHECK(o.device_iterations() >= stages, "Options: pipelined inference over ", ipus,
                " IPUs has ", stages, " stages, so deviceIterations must be >= ", stages, " (got ",
                o.device_iterations(), ")");
}

// The out-of-memory error a program compiled to be reported (not refused) throws when it is run,
// unless the user allows it; empty when it fits.
inline std::string deferred_oom(const backend::Executable& exe, const Options& o) {
  const backend::Profiling* p = exe.profiling();
  if (p == nullptr || o.allow_out_of_memory()) return {};
  backend::MemoryFit fit = p->memory_fit();
  return fit.fits ? std::string() : std::move(fit.message);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What an estimate says of any program: the configuration, the machine, the memory, and one
// micro-batch's time.
inline void describe(Estimate& e, const char* program, const Options& o,
                     const backend::Profiling& p, const ir::Graph& g, int64_t micro_batch) {
  e.program = program;
  e.target = p.target_description();
  e.micro_batch = micro_batch;
  e.replicas = o.replication_factor();
  e.device_iterations = o.device_iterations();
  e.instances = o.Distributed.num_processes();
  e.devices_per_replica = ipus_used(g);
  e.pipelined = pipelined(o, e.devices_per_replica);
  e.memory = p.memory_fit();
  e.clock_hz = p.clock_hz();
  e.micro_batch_seconds = p.simulated_seconds_for(1);
  e.step_split = p.time_split();
}

inline std::string detail_str_ga(const Options& o) {
  return ipuml::detail::str(" x gradientAccumulation (", o.gradient_accumulation(), ")");
}

inline int64_t split_batch(const Tensor& data, int64_t parts, const char* who, const Options& o,
                           bool training) {
  IPUML_CHECK(data.dim() >= 1, who, ": expected a batched input, got shape ",
              shape_str(data.shape()));
  const int64_t n = data.shape()[0];
  IPUML_CHECK(
      n > 0 && n % parts == 0, who, ": got a batch of ", n, " samples, which does not split ",
      "into deviceIterations (", o.device_iterations(), ") x replicationFactor (",
      o.replication_factor(), ")", training ? detail_str_ga(o) : std::string(), " = ", parts,
      " equal micro-batches; size the DataLoader's batch as Options::combined_batch(micro)");
  return n / parts;
}

inline Tensor select_outputs(const std::vector<Tensor>& per_micro, const Options& o,
                             int64_t per_iteration, OutputMode mode) {
  // per_micro is ordered [deviceIteration][...], per_iteration entries each.
  const int64_t d = o.device_iterations();
  std::vector<Tensor> chosen;
  switch (mode) {
    case OutputMode::All:
    case OutputMode::Default:
      chosen = per_micro;
      break;
    case OutputMode::Final:
      chosen.assign(per_micro.end() - per_iteration, per_micro.end());
      break;
    case OutputMode::EveryN:
      for (int64_t i = o.output_every_n() - 1; i < d; i += o.output_every_n())
        chosen.insert(chosen.end(), per_micro.begin() + i * per_iteration,
                      per_micro.begin() + (i + 1) * per_iteration);
      break;
    case OutputMode::Sum: {
      Tensor s = per_micro[0];
      for (size_t i = 1; i < per_micro.size(); ++i) s = add(s, per_micro[i]);
      return s;
    }
  }
  if (chosen.empty()) return Tensor();
  if (chosen.size() == 1) return chosen[0];
  if (chosen[0].dim() == 0) return stack(chosen, 0);
  return cat(chosen, 0);
}

}  // namespace detail

IPUML_INLINE TrainingModel::TrainingModel(std::shared_ptr<nn::Module> model, Options options,
                                          optim::Optimizer& optimizer, LossFn loss)
    : model_(std::move(model)), options_(std::move(options)), optimizer_(optimizer) {
  IPUML_CHECK(model_ != nullptr, "trainingModel: the model is null");
  IPUML_CHECK(loss != nullptr, "trainingModel: a loss function is required");
  nn::Module* m = model_.get();
  forward_ = [m](const Tensors& in) { return Tensors{m->forward(in[0])}; };
  loss_ = [l = std::move(loss)](const Tensors& out, const Tensors& tg) { return l(out[0], tg[0]); };
  detail::backend_for(options_);  // an unusable backend is reported before anything runs
}

IPUML_INLINE TrainingModel::TrainingModel(std::shared_ptr<nn::Module> model, Options options,
                                          optim::Optimizer& optimizer, ForwardFn forward,
                                          MultiLossFn loss)
    : model_(std::move(model)),
      options_(std::move(options)),
      optimizer_(optimizer),
      forward_(std::move(forward)),
      loss_(std::move(loss)) {
  IPUML_CHECK(model_ != nullptr, "trainingModel: the model is null");
  IPUML_CHECK(forward_ != nullptr, "trainingModel: a forward function is required");
  IPUML_CHECK(loss_ != nullptr, "trainingModel: a loss function is required");
  detail::backend_for(options_);
}

IPUML_INLINE void TrainingModel::compile(const Tensor& data, const Tensor& labels) {
  compile(Tensors{data}, Tensors{labels});
}

namespace detail {

// The micro-step program: forward, loss, backward (seeded with the loss scaling), then the
// optimizer's step, or with `accumulators` the gradients added into them; the update placed
// where each parameter lives, recomputation from checkpoints, pipeline stages.
inline ir::Trace trace_step(nn::Module& model, const ForwardFn& forward, const MultiLossFn& loss_fn,
                            optim::Optimizer& optimizer, const std::vector<Tensor>& params,
                            const Tensors& inputs, const Tensors& targets, int64_t micro_batch,
                            std::vector<Tensor>* accumulators, const Options& o) {
  ir::Tracer tracer;
  for (auto& [name, t] : model.named_parameters()) tracer.name_state(t, name);
  for (auto& [name, t] : model.named_buffers()) tracer.name_state(t, name);
  Tensors xs, ys;
  auto feed = [&](const Tensors& ts, Tensors& out, const char* one, const char* many) {
    for (size_t i = 0; i < ts.size(); ++i) {
      Shape s = ts[i].shape();
      s[0] = micro_batch;
      out.push_back(tracer.input(ir::TensorMeta{s, ts[i].dtype()},
                                 ts.size() == 1 ? one : many + std::to_string(i)));
    }
  };
  feed(inputs, xs, "data", "input");
  feed(targets, ys, "labels", "target");
  optimizer.zero_grad();
  Tensor loss = loss_fn(forward(xs), ys);
  IPUML_CHECK(loss.numel() == 1, "trainingModel: the loss must be a scalar, got shape ",
              shape_str(loss.shape()));
  // PopTorch's loss_scaling: the gradient seed is the scale; the optimizer divides it out.
  const double scaling = optimizer.loss_scaling();
  const size_t backward_begin = tracer.num_nodes();
  if (scaling != 1.0)
    loss.backward(full(loss.shape(), scaling, loss.dtype()));
  else
    loss.backward();
  const size_t update_begin = tracer.num_nodes();
  {
    NoGradGuard ng;
    if (!accumulators) {
      optimizer.step();
    } else {
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i].grad().defined()) (*accumulators)[i].add_(params[i].grad());
    }
  }
  optimizer.zero_grad();
  ir::Trace step = tracer.finish({loss.reshape({})});
  // The update (or the accumulation) runs where each parameter lives, not wherever the
  // forward pass ended.
  auto homes = ir::state_homes(step.graph, update_begin);
  ir::place_update(step.graph, update_begin, homes);
  const auto rec = ir::recompute_from_checkpoints(step.graph, backward_begin, update_begin);
  if (pipelined(o, ipus_used(step.graph)))
    ir::assign_pipeline_stages(step.graph, backward_begin,
                               update_begin + static_cast<size_t>(rec.nodes_recomputed));
  return step;
}

// The update program: the accumulated gradients, scaled, into the parameters' grads, the
// optimizer's step, the accumulators cleared.
inline ir::Trace trace_update(nn::Module& model, optim::Optimizer& optimizer,
                              const std::vector<Tensor>& params, std::vector<Tensor>& accumulators,
                              double scale) {
  ir::Tracer tracer;
  for (auto& [name, t] : model.named_parameters()) tracer.name_state(t, name);
  NoGradGuard ng;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    tracer.remember_grad(p.impl());
    p.set_grad(mul(accumulators[i], scale));
  }
  optimizer.step();
  for (auto& a : accumulators) a.zero_();
  optimizer.zero_grad();
  return tracer.finish({});
}

// The update runs where each state lives in the step graph, found by the tensor it is bound to.
inline void place_like_step(ir::Trace& update, const ir::Trace& step) {
  const auto step_homes = ir::state_homes(step.graph, step.graph.nodes.size());
  auto& ug = update.graph;
  std::vector<int> homes(ug.values.size(), -1);
  for (size_t i = 0; i < ug.states.size(); ++i)
    for (size_t j = 0; j < step.graph.states.size(); ++j)
      if (update.states[i].same(step.states[j])) {
        homes[static_cast<size_t>(ug.states[i])] =
            step_homes[static_cast<size_t>(step.graph.states[j])];
        break;
      }
  ir::place_update(ug, 0, homes);
}

// Optimizer state off chip (both programs) and sharded over the replicas (the update's), as
// Options.TensorLocations asks; `update` is null for the fused step, which has no replicas.
inline void place_optimizer_state(const Options& o, optim::Optimizer& optimizer,
                                  const std::vector<Tensor>& params, ir::Trace& step,
                                  ir::Trace* update, int64_t replicas) {
  const auto& where = o.TensorLocations.optimizer;
  if (where.on_chip && !where.replicated_tensor_sharding) return;
  std::vector<Tensor> opt_state;
  for (size_t i = 0; i < params.size(); ++i)
    for (auto& [name, t] : optimizer.state(i)) opt_state.push_back(t);
  if (!where.on_chip) {
    ir::place_off_chip(step.graph, step.states, opt_state);
    if (update) ir::place_off_chip(update->graph, update->states, opt_state);
  }
  if (where.replicated_tensor_sharding && update && replicas > 1)
    ir::shard_across_replicas(update->graph, update->states, opt_state, replicas);
}

// What each of r replicas binds the step graph to: its own accumulators, and its own copy of
// every other state the step writes (batch-norm running statistics), as each replica of a
// PopTorch program keeps its own buffers; replica 0's are the model's, the ones the host sees.
// The weights are only read by the step, and shared. Without accumulators (the fused step)
// there is one replica.
inline std::vector<std::vector<Tensor>> replica_states(
    const ir::Trace& step, const std::vector<Tensor>& params,
    const std::vector<std::vector<Tensor>>& accumulators, int64_t r) {
  std::vector<std::vector<Tensor>> out(static_cast<size_t>(r), step.states);
  if (accumulators.empty()) return out;
  const auto& sg = step.graph;
  for (size_t s = 0; s < step.states.size(); ++s) {
    bool accumulator = false;
    for (size_t i = 0; i < params.size(); ++i)
      if (step.states[s].same(accumulators[0][i])) {
        accumulator = true;
        for (int64_t k = 1; k < r; ++k)
          out[static_cast<size_t>(k)][s] = accumulators[static_cast<size_t>(k)][i];
      }
    bool written = false;
    for (const auto& u : sg.updates) written = written || u.state == sg.states[s];
    if (accumulator || !written) continue;
    NoGradGuard ng;
    for (int64_t k = 1; k < r; ++k) out[static_cast<size_t>(k)][s] = step.states[s].clone();
  }
  return out;
}

}  // namespace detail

IPUML_INLINE void TrainingModel::compile(const Tensors& inputs, const Tensors& targets) {
  compile_impl(inputs, targets, options_.compile_only());
}

// `report_oom`: a model that does not fit compiles anyway, its error kept for a later run.
IPUML_INLINE void TrainingModel::compile_impl(const Tensors& inputs, const Tensors& targets,
                                              bool report_oom) {
  const auto t0 = std::chrono::steady_clock::now();
  Options o = options_;
  if (report_oom) o.allowOutOfMemory(true);
  const int64_t r = o.replication_factor(), g = o.gradient_accumulation();
  const int64_t parts = o.device_iterations() * r * g;
  IPUML_CHECK(!inputs.empty(), "trainingModel: at least one input tensor is required");
  micro_batch_ = detail::split_batch(inputs[0], parts, "trainingModel", o, true);
  const int64_t rows = inputs[0].shape()[0];
  const bool single = inputs.size() == 1 && targets.size() == 1;
  auto check_rows = [&](const Tensors& ts, const char* what) {
    for (size_t i = 0; i < ts.size(); ++i)
      IPUML_CHECK(ts[i].defined() && ts[i].dim() >= 1 && ts[i].shape()[0] == rows,
                  "trainingModel: ", single ? "labels" : what,
                  single ? std::string() : ipuml::detail::str(" ", i), " of shape ",
                  ts[i].defined() ? shape_str(ts[i].shape()) : "undefined",
                  single ? " do" : " does", " not match the ", rows,
                  " samples of the data (every input and target is batched along dim 0)");
  };
  check_rows(inputs, "input");
  check_rows(targets, "target");
  input_shapes_.clear();
  target_shapes_.clear();
  for (auto& t : inputs) input_shapes_.push_back(t.shape());
  for (auto& t : targets) target_shapes_.push_back(t.shape());
  if (o.has_seed()) manual_seed(o.seed());

  const std::vector<Tensor> params = optimizer_.parameters();
  gradient_bytes_ = 0;
  for (auto& p : params) gradient_bytes_ += static_cast<size_t>(p.numel()) * dtype_size(p.dtype());
  // One replica without accumulation needs no accumulators: the step graph runs the optimizer
  // itself, as PopTorch's single training graph does, and there is no update graph.
  const int64_t instances = o.Distributed.num_processes();
  const bool fused = r == 1 && g == 1 && instances == 1;
  accumulators_.assign(fused ? 0 : static_cast<size_t>(r), {});
  {
    NoGradGuard ng;
    for (auto& acc : accumulators_)
      for (auto& p : params)  // a model made on the meta device (for sizing) gets meta ones
        acc.push_back(zeros(p.shape(), TensorOptions(p.dtype()).device(
                                           p.is_meta() ? p.device() : default_device())));
  }

  // The micro-step: forward, loss, backward, then either the optimizer step (fused) or the
  // gradients added into replica 0's accumulators.
  model_->train();
  step_trace_ = detail::trace_step(*model_, forward_, loss_, optimizer_, params, inputs, targets,
                                   micro_batch_, fused ? nullptr : &accumulators_[0], o);
  // The update: average the accumulated gradients, step, clear the accumulators. The replicas'
  // sums reach replica 0's accumulators first, through the all-reduce (reduce_replicas), which
  // the runtime performs and charges once per update, outside every program.
  if (!fused) {
    update_trace_ = detail::trace_update(*model_, optimizer_, params, accumulators_[0],
                                         1.0 / static_cast<double>(r * g * instances));
    detail::place_like_step(update_trace_, step_trace_);
  }
  detail::place_optimizer_state(o, optimizer_, params, step_trace_,
                                fused ? nullptr : &update_trace_, r * instances);
  step_states_ = detail::replica_states(step_trace_, params, accumulators_, r);

  const int64_t ipus = detail::ipus_used(step_trace_.graph);
  detail::check_pipeline(o, step_trace_.graph, true);
  step_exe_ = detail::compile_program(o, step_trace_.graph,
                                      detail::program_options_for(o, ipus, true, "training"));
  // A compile-only model never runs, so it needs no further instances for replicas.
  lanes_ = fused || o.compile_only() ? detail::ReplicaLanes{}
                                     : detail::make_lanes(*step_exe_, detail::replica_lanes(o));
  auto update_opts = detail::program_options_for(o, ipus, true, "weight_update");
  update_opts.progress = false;
  // The update is checked for fit together with the step (one image) just below.
  update_opts.allow_out_of_memory = true;
  if (!fused) {
    update_exe_ = detail::compile_program(o, update_trace_.graph, update_opts);
    std::vector<bool> shared(update_trace_.states.size(), false);
    for (size_t i = 0; i < shared.size(); ++i)
      for (auto& s : step_trace_.states)
        if (update_trace_.states[i].same(s)) {
          shared[i] = true;
          break;
        }
    step_exe_->share_memory_image(*update_exe_, shared, o.allow_out_of_memory());
  }
  oom_message_ = detail::deferred_oom(*step_exe_, options_);
  compile_wall_seconds_ = detail::seconds_since(t0);
  compiled_ = true;
}

IPUML_INLINE void TrainingModel::check_shapes(const Tensors& inputs, const Tensors& targets) const {
  auto same = [](const Tensors& ts, const std::vector<Shape>& shapes) {
    if (ts.size() != shapes.size()) return false;
    for (size_t i = 0; i < ts.size(); ++i)
      if (!ts[i].defined() || ts[i].shape() != shapes[i]) return false;
    return true;
  };
  auto shapes_str = [](const std::vector<Shape>& shapes) {
    std::string s;
    for (auto& sh : shapes) s += (s.empty() ? "" : ", ") + shape_str(sh);
    return s;
  };
  auto tensors_str = [](const Tensors& ts) {
    std::string s;
    for (auto& t : ts) s += (s.empty() ? "" : ", ") + (t.defined() ? shape_str(t.shape()) : "?");
    return s;
  };
  IPUML_CHECK(same(inputs, input_shapes_) && same(targets, target_shapes_),
              "trainingModel: this model was compiled for data ", shapes_str(input_shapes_),
              " and labels ", shapes_str(target_shapes_), ", got ", tensors_str(inputs), " and ",
              tensors_str(targets), " (a new batch shape needs a new trainingModel)");
}

IPUML_INLINE bool TrainingModel::modelled_iteration(Estimate& e) const {
  const backend::Profiling* ps = step_exe_->profiling();
  const backend::Profiling* pu = update_exe_ ? update_exe_->profiling() : nullptr;
  if (ps == nullptr || (update_exe_ && pu == nullptr)) return false;
  const Options& o = options_;
  // Replicas run side by side on their own devices: an update costs one replica's G
  // micro-batches, then the update program and one all-reduce of the gradients.
  e.accumulation_seconds = ps->simulated_seconds_for(o.gradient_accumulation());
  e.update_seconds = pu ? pu->simulated_seconds() : 0;
  if (pu) e.update_split = pu->time_split();
  const int64_t all_replicas = o.replication_factor() * o.Distributed.num_processes();
  e.allreduce_seconds =
      pu && all_replicas > 1 ? pu->allreduce_seconds(gradient_bytes_, all_replicas) : 0;
  return true;
}

IPUML_INLINE Estimate TrainingModel::estimate(const Tensor& data, const Tensor& labels) {
  return estimate(Tensors{data}, Tensors{labels});
}

IPUML_INLINE bool TrainingModel::configuration(Estimate& e) const {
  if (!step_exe_ || !modelled_iteration(e)) return false;
  const Options& o = options_;
  detail::describe(e, "training", o, *step_exe_->profiling(), step_trace_.graph, micro_batch_);
  e.gradient_accumulation = o.gradient_accumulation();
  // Summed as a run sums its device iterations, so that the two agree to the bit.
  for (int64_t it = 0; it < e.device_iterations; ++it) e.call_seconds += e.iteration_seconds();
  e.samples_per_call = o.combined_batch(micro_batch_);
  e.wall_seconds = compile_wall_seconds_;
  return true;
}

IPUML_INLINE Estimate TrainingModel::estimate(const Tensors& inputs, const Tensors& targets) {
  if (!compiled_) compile_impl(inputs, targets, true);
  check_shapes(inputs, targets);
  Estimate e;
  IPUML_CHECK(configuration(e), "trainingModel.estimate: backend '", options_.backend_name(),
              "' models no device, so there is nothing to estimate (the emulated IPU does: "
              "Options.useIpuModel(true))");
  return e;
}

IPUML_INLINE void TrainingModel::printProfileSummary(std::ostream& os) const {
  const backend::Profiling* step = step_exe_ ? step_exe_->profiling() : nullptr;
  if (step == nullptr) return;
  os << "Program 'training': one micro-batch of " << micro_batch_ << " samples on one replica\n";
  step->print_summary(os, static_cast<double>(micro_batch_));
  if (const backend::Profiling* update = update_exe_ ? update_exe_->profiling() : nullptr) {
    os << "Program 'weight_update': the optimizer step, once per weight update\n";
    update->print_summary(os, 0);
  }
  Estimate e;
  if (!configuration(e)) return;
  os << "The whole configuration as it runs (its optimizer step and gradient all-reduce "
        "included):\n";
  print_configuration(os, e);
}

IPUML_INLINE Tensor TrainingModel::operator()(const Tensor& data, const Tensor& labels) {
  return (*this)(Tensors{data}, Tensors{labels});
}

IPUML_INLINE Tensor TrainingModel::operator()(const Tensors& inputs, const Tensors& targets) {
  IPUML_CHECK(!options_.compile_only(),
              "trainingModel: Options.compileOnly is set, so this model compiles but does not "
              "run; estimate(data, labels) gives its fit and projected throughput");
  if (!compiled_) compile(inputs, targets);
  check_shapes(inputs, targets);
  if (!oom_message_.empty()) fail(oom_message_);
  const Options& o = options_;
  const int64_t d = o.device_iterations(), g = o.gradient_accumulation(),
                r = o.replication_factor();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> losses;
  double simulated = 0;
  Estimate parts;
  const bool have_sim = modelled_iteration(parts);
  int64_t row = 0;
  // Random ops (dropout) are keyed by the step number each micro-batch would have if every
  // instance's replicas ran in this process, so an instance's replica k draws what global
  // replica (process_id x r + k) of one process would.
  const int64_t all_r = r * o.Distributed.num_processes();
  const int64_t first_rep = r * o.Distributed.process_id();
  for (int64_t it = 0; it < d; ++it) {
    const uint64_t base = run_counter_;
    run_counter_ += static_cast<uint64_t>(g * all_r + (update_exe_ ? 1 : 0));
    // The iteration's micro-batches in order [accumulation step][replica]; a pipelined program
    // overlaps them over its stages, with the bits of one after another.
    std::vector<backend::RunItem> items;
    std::vector<int64_t> replica_of;
    for (int64_t acc = 0; acc < g; ++acc)
      for (int64_t rep = 0; rep < r; ++rep, row += micro_batch_) {
        backend::RunItem item;
        for (auto& t : inputs) item.inputs.push_back(t.narrow(0, row, micro_batch_));
        for (auto& t : targets) item.inputs.push_back(t.narrow(0, row, micro_batch_));
        item.states = &step_states_[static_cast<size_t>(rep)];
        item.step = base + static_cast<uint64_t>(acc * all_r + first_rep + rep);
        items.push_back(std::move(item));
        replica_of.push_back(rep);
      }
    for (auto& out : detail::run_replicas(*step_exe_, lanes_, items, replica_of))
      losses.push_back(out[0]);
    if (have_sim) simulated += parts.iteration_seconds();
    if (!update_exe_) continue;  // the step graph ran the optimizer itself
    reduce_replicas();
    if (o.Distributed.num_processes() > 1) allreduce_accumulators();
    update_exe_->run({}, update_trace_.states, base + static_cast<uint64_t>(g * all_r));
    if (all_r > 1) ++allreduces_;
  }
  stats_.samples = inputs[0].shape()[0];
  stats_.wall_seconds = detail::seconds_since(t0);
  stats_.simulated_seconds = have_sim ? std::optional<double>(simulated) : std::nullopt;
  OutputMode mode = o.output_mode() == OutputMode::Default ? OutputMode::Final : o.output_mode();
  return detail::select_outputs(losses, o, g * r, mode);
}

// The replicas' all-reduce, performed: replica k's sums are added into replica 0's in replica
// order (the others zeroed for the next update), so the result does not depend on how the
// replicas were scheduled.
IPUML_INLINE void TrainingModel::reduce_replicas() {
  NoGradGuard ng;
  auto& acc0 = accumulators_[0];
  for (size_t k = 1; k < accumulators_.size(); ++k)
    for (size_t i = 0; i < acc0.size(); ++i) {
      acc0[i].add_(accumulators_[k][i]);
      accumulators_[k][i].zero_();
    }
}

// Across instances: replica 0's accumulators (already holding this instance's replicas) are
// summed over the instances in rank order, so every instance runs the same update on the same
// bits.
IPUML_INLINE void TrainingModel::allreduce_accumulators() {
  NoGradGuard ng;
  auto& acc0 = accumulators_[0];
  int64_t n = 0;
  for (auto& a : acc0) {
    IPUML_CHECK(a.dtype() == kFloat32,
                "trainingModel: gradients across instances must be float32, "
                "got ",
                dtype_name(a.dtype()));
    n += a.numel();
  }
  allreduce_buffer_.resize(static_cast<size_t>(n));
  float* at = allreduce_buffer_.data();
  for (auto& a : acc0) {
    std::copy_n(a.data_ptr<float>(), a.numel(), at);
    at += a.numel();
  }
  options_.Distributed.communicator->allreduce_sum(allreduce_buffer_.data(), n);
  at = allreduce_buffer_.data();
  for (auto& a : acc0) {
    std::copy_n(at, a.numel(), a.data_ptr<float>());
    at += a.numel();
  }
}

IPUML_INLINE std::string TrainingModel::report_json() const {
  const backend::Profiling* p = step_exe_ ? step_exe_->profiling() : nullptr;
  return p ? p->report_json() : "{}";
}

IPUML_INLINE InferenceModel::InferenceModel(std::shared_ptr<nn::Module> model, Options options)
    : model_(std::move(model)), options_(std::move(options)) {
  IPUML_CHECK(model_ != nullptr, "inferenceModel: the model is null");
  nn::Module* m = model_.get();
  forward_ = [m](const Tensors& in) { return Tensors{m->forward(in[0])}; };
  detail::backend_for(options_);
}

IPUML_INLINE InferenceModel::InferenceModel(std::shared_ptr<nn::Module> model, Options options,
                                            ForwardFn forward)
    : model_(std::move(model)), options_(std::move(options)), forward_(std::move(forward)) {
  IPUML_CHECK(model_ != nullptr, "inferenceModel: the model is null");
  IPUML_CHECK(forward_ != nullptr, "inferenceModel: a forward function is required");
  detail::backend_for(options_);
}

IPUML_INLINE void InferenceModel::compile(const Tensor& data) { compile(Tensors{data}); }

IPUML_INLINE void InferenceModel::compile(const Tensors& inputs) {
  compile_impl(inputs, options_.compile_only());
}

IPUML_INLINE void InferenceModel::compile_impl(const Tensors& inputs, bool report_oom) {
  const auto t0 = std::chrono::steady_clock::now();
  Options o = options_;
  if (report_oom) o.allowOutOfMemory(true);
  IPUML_CHECK(!inputs.empty(), "inferenceModel: at least one input tensor is required");
  micro_batch_ = detail::split_batch(inputs[0], o.device_iterations() * o.replication_factor(),
                                     "inferenceModel", o, false);
  input_shapes_.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    IPUML_CHECK(
        inputs[i].defined() && inputs[i].dim() >= 1 && inputs[i].shape()[0] == inputs[0].shape()[0],
        "inferenceModel: input ", i, " of shape ",
        inputs[i].defined() ? shape_str(inputs[i].shape()) : "undefined", " does not match the ",
        inputs[0].shape()[0], " samples of input 0 (every input is batched along dim 0)");
    input_shapes_.push_back(inputs[i].shape());
  }
  const bool was_training = model_->is_training();
  model_->eval();
  {
    ir::Tracer tracer;
    for (auto& [name, t] : model_->named_parameters()) tracer.name_state(t, name);
    Tensors xs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Shape s = input_shapes_[i];
      s[0] = micro_batch_;
      xs.push_back(tracer.input(ir::TensorMeta{s, inputs[i].dtype()},
                                inputs.size() == 1 ? "data" : "input" + std::to_string(i)));
    }
    NoGradGuard ng;
    Tensors outs = forward_(xs);
    IPUML_CHECK(!outs.empty(), "inferenceModel: the forward function returned no outputs");
    num_outputs_ = outs.size();
    trace_ = tracer.finish(outs);
  }
  model_->train(was_training);
  const int64_t ipus = detail::ipus_used(trace_.graph);
  if (detail::pipelined(o, ipus))
    ir::assign_pipeline_stages(trace_.graph, trace_.graph.nodes.size(), trace_.graph.nodes.size());
  detail::check_pipeline(o, trace_.graph, false);
  exe_ = detail::compile_program(o, trace_.graph,
                                 detail::program_options_for(o, ipus, false, "inference"));
  // Replicas share the bound states, so they run at the same time only when none is written.
  if (trace_.graph.updates.empty() && !o.compile_only())
    lanes_ = detail::make_lanes(*exe_, detail::replica_lanes(o));
  oom_message_ = detail::deferred_oom(*exe_, options_);
  compile_wall_seconds_ = detail::seconds_since(t0);
  compiled_ = true;
}

IPUML_INLINE Estimate InferenceModel::estimate(const Tensor& data) {
  return estimate(Tensors{data});
}

IPUML_INLINE Estimate InferenceModel::estimate(const Tensors& inputs) {
  if (!compiled_) compile_impl(inputs, true);
  bool same = inputs.size() == input_shapes_.size();
  for (size_t i = 0; i < inputs.size() && same; ++i)
    same = inputs[i].defined() && inputs[i].shape() == input_shapes_[i];
  IPUML_CHECK(same, "inferenceModel.estimate: this model was compiled for data of shape ",
              shape_str(input_shapes_[0]), "; estimate the batch it was compiled for");
  const Options& o = options_;
  const backend::Profiling* p = exe_->profiling();
  IPUML_CHECK(p != nullptr, "inferenceModel.estimate: backend '", o.backend_name(),
              "' models no device, so there is nothing to estimate (the emulated IPU does: "
              "Options.useIpuModel(true))");
  Estimate e;
  detail::describe(e, "inference", o, *p, trace_.graph, micro_batch_);
  // Replicas run side by side: a call costs one replica's deviceIterations micro-batches.
  e.call_seconds = p->simulated_seconds_for(o.device_iterations());
  e.samples_per_call = o.combined_batch(micro_batch_, false);
  e.wall_seconds = compile_wall_seconds_;
  return e;
}

IPUML_INLINE Tensor InferenceModel::operator()(const Tensor& input) {
  Tensors out = (*this)(Tensors{input});
  IPUML_CHECK(out.size() == 1, "inferenceModel: the model has ", out.size(),
              " outputs; call it with a vector of inputs to get them all");
  return out[0];
}

IPUML_INLINE Tensors InferenceModel::operator()(const Tensors& given) {
  IPUML_CHECK(!options_.compile_only(),
              "inferenceModel: Options.compileOnly is set, so this model compiles but does not "
              "run; estimate(data) gives its fit and projected throughput");
  if (!compiled_) compile(given);
  if (!oom_message_.empty()) fail(oom_message_);
  const Options& o = options_;
  const OutputMode mode =
      o.output_mode() == OutputMode::Default ? OutputMode::All : o.output_mode();
  const Shape& first = input_shapes_[0];
  // A short last batch runs padded with zero rows; only its own rows' outputs come back.
  auto tail_matches = [](const Tensor& t, const Shape& s) {
    return t.defined() && t.dim() == static_cast<int64_t>(s.size()) && t.dim() >= 1 &&
           Shape(t.shape().begin() + 1, t.shape().end()) == Shape(s.begin() + 1, s.end());
  };
  bool short_batch = given.size() == input_shapes_.size() && mode == OutputMode::All;
  for (size_t i = 0; i < given.size() && short_batch; ++i)
    short_batch = tail_matches(given[i], input_shapes_[i]) && given[i].shape()[0] > 0 &&
                  given[i].shape()[0] < first[0] && given[i].shape()[0] == given[0].shape()[0];
  const int64_t rows = short_batch ? given[0].shape()[0] : 0;
  Tensors inputs = given;
  if (short_batch) {
    NoGradGuard ng;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Shape pad = input_shapes_[i];
      pad[0] -= rows;
      inputs[i] = cat({given[i], zeros(pad, given[i].dtype())}, 0);
    }
  }
  bool same = inputs.size() == input_shapes_.size();
  for (size_t i = 0; i < inputs.size() && same; ++i)
    same = inputs[i].defined() && inputs[i].shape() == input_shapes_[i];
  if (!same) {
    std::string want, got;
    for (auto& sh : input_shapes_) want += (want.empty() ? "" : ", ") + shape_str(sh);
    for (auto& t : given)
      got += (got.empty() ? "" : ", ") + (t.defined() ? shape_str(t.shape()) : "?");
    fail("inferenceModel: this model was compiled for data ", want, ", got ", got,
         " (a batch with fewer rows is padded; more rows need a new inferenceModel)");
  }
  const int64_t parts = o.device_iterations() * o.replication_factor();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensors> outs(num_outputs_);
  double simulated = 0;
  bool have_sim = true;
  std::vector<backend::RunItem> items;
  std::vector<int64_t> replica_of;
  for (int64_t i = 0; i < parts; ++i) {
    backend::RunItem item;
    for (auto& t : inputs) item.inputs.push_back(t.narrow(0, i * micro_batch_, micro_batch_));
    item.states = &trace_.states;
    item.step = run_counter_++;
    items.push_back(std::move(item));
    replica_of.push_back(i % o.replication_factor());
  }
  for (auto& res : detail::run_replicas(*exe_, lanes_, items, replica_of))
    for (size_t k = 0; k < num_outputs_; ++k) outs[k].push_back(res[k]);
  // Replicas run side by side: the call costs one replica's deviceIterations micro-batches.
  if (const backend::Profiling* p = exe_->profiling())
    simulated = p->simulated_seconds_for(o.device_iterations());
  else
    have_sim = false;
  stats_.samples = first[0];
  stats_.wall_seconds = detail::seconds_since(t0);
  stats_.simulated_seconds = have_sim ? std::optional<double>(simulated) : std::nullopt;
  Tensors result;
  for (auto& per_micro : outs) {
    Tensor out = detail::select_outputs(per_micro, o, o.replication_factor(), mode);
    if (short_batch && out.defined() && out.dim() >= 1) out = out.narrow(0, 0, rows).contiguous();
    result.push_back(out);
  }
  if (short_batch) stats_.samples = rows;
  return result;
}

IPUML_INLINE std::string InferenceModel::report_json() const {
  const backend::Profiling* p = exe_ ? exe_->profiling() : nullptr;
  return p ? p->report_json() : "{}";
}

}  // namespace ipuml::runtime
