// ipuml-neuron-inverter: the Neuron-Inverter regression (train_replica.py) on cellSpike HDF5
// files: a 1-d CNN + MLP from 4-probe voltage traces to 15 conductances, trained with AdamW,
// linear warm-up then ReduceLROnPlateau, data-parallel over replicas and over MPI instances
// (ipuml-run --num-instances N --num-replicas R, or mpirun / srun directly).
//
// Rank 0 prints the log and writes <outPath>/scalars.csv, <outPath>/training.html (loss and LR
// plots, inline SVG), the checkpoint and its state; every rank reads only its replicas' shares.
#include <ipuml/datasets/cellspike.hpp>
#include <ipuml/dist/communicator.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/neuron_inverter.hpp>
#include <ipuml/optim/optim.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "compile_only.hpp"
#include "config_presets.hpp"
#include "example_support.hpp"
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#ifndef IPUML_NEURON_DESIGN_DIR
#define IPUML_NEURON_DESIGN_DIR "."
#endif
#ifndef IPUML_NEURON_DESIGN_INSTALL_DIR
#define IPUML_NEURON_DESIGN_INSTALL_DIR IPUML_NEURON_DESIGN_DIR
#endif

namespace {

using namespace ipuml;
using examples::Clock;
using examples::fixed;
using examples::seconds_since;
namespace fs = std::filesystem;

// An hpar_*.yaml design: the model and the training recipe.
struct Design {
  std::string name;
  models::NeuronInverterDesign model;
  int64_t epochs = 1;
  int64_t local_batch = 16;
  int64_t steps_per_iter = 1;  // device iterations per host batch
  int64_t max_samples = 0;     // of the training split per epoch, over all replicas (0: all)
  int64_t max_val_samples = 0;
  int64_t warmup = 0;
  double init_lr = 1e-3;
  double weight_decay = 1e-2;
  int64_t patience = 10;
  double factor = 0.1;
  int64_t cooldown = 2;
};

template <typename T>
T get_or(const YAML::Node& n, const char* key, T fallback) {
  return n && n[key] ? n[key].as<T>() : fallback;
}

Design load_design(const std::string& name_or_path) {
  fs::path p = name_or_path;
  // A shipped design: from the source tree, or where `cmake --install` put it.
  if (!fs::exists(p)) p = fs::path(IPUML_NEURON_DESIGN_DIR) / (name_or_path + ".yaml");
  if (!fs::exists(p)) {
    const fs::path installed = fs::path(IPUML_NEURON_DESIGN_INSTALL_DIR) / (name_or_path + ".yaml");
    if (fs::exists(installed)) p = installed;
  }
  IPUML_CHECK(fs::exists(p), "ipuml-neuron-inverter: no design '", name_or_path,
              "' (neither a file "
              "nor ",
              (fs::path(IPUML_NEURON_DESIGN_DIR) / (name_or_path + ".yaml")).string(),
              "; the shipped designs are hpar_gc4 and hpar_dev)");
  Design d;
  try {
    const YAML::Node y = YAML::LoadFile(p.string());
    d.name = get_or<std::string>(y, "design", p.stem().string());
    d.epochs = get_or<int64_t>(y, "max_epochs", 1);
    d.local_batch = get_or<int64_t>(y, "batch_size", 16);
    d.steps_per_iter = get_or<int64_t>(y, "replica_steps_per_iter", 1);
    d.max_samples = get_or<int64_t>(y, "max_glob_samples_per_epoch", 0);
    d.max_val_samples = get_or<int64_t>(y, "max_val_samples", 0);
    const YAML::Node t = y["train_conf"];
    d.warmup = get_or<int64_t>(t, "warmup_epochs", 0);
    if (t && t["optimizer"]) {
      const auto opt = t["optimizer"];
      IPUML_CHECK(opt.IsSequence() && opt.size() == 2 && opt[0].as<std::string>() == "adamW",
                  "ipuml-neuron-inverter: ", p.string(),
                  ": train_conf.optimizer must be [adamW, lr]");
      d.init_lr = opt[1].as<double>();
    }
    d.weight_decay = get_or<double>(t, "weight_decay", 1e-2);
    const YAML::Node s = t ? t["LRsched"] : YAML::Node();
    d.patience = get_or<int64_t>(s, "plateau_patience", 10);
    d.factor = get_or<double>(s, "reduceFactor", 0.1);
    d.cooldown = get_or<int64_t>(s, "cooldown", 2);
    const YAML::Node m = y["model"];
    IPUML_CHECK(m && m["conv_block"] && m["fc_block"], "ipuml-neuron-inverter: ", p.string(),
                ": needs model.conv_block and model.fc_block");
    d.model.conv_filters(m["conv_block"]["filter"].as<std::vector<int64_t>>())
        .conv_kernels(m["conv_block"]["kernel"].as<std::vector<int64_t>>())
        .pool_sizes(m["conv_block"]["pool"].as<std::vector<int64_t>>())
        .fc_dims(m["fc_block"]["dims"].as<std::vector<int64_t>>())
        .dropout(get_or<double>(m["fc_block"], "dropFrac", 0.05))
        .batch_norm_flat(get_or<bool>(m, "batch_norm_flat", true));
  } catch (const YAML::Exception& e) {
    fail("ipuml-neuron-inverter: cannot read the design ", p.string(), ": ", e.what());
  }
  d.model.validate();
  return d;
}

struct Config {
  std::string design = "hpar_dev";
  int64_t epochs = 0;  // 0: the design's
  std::string cell = "witness2c";
  double init_lr = 0;  // 0: the design's
  std::string out_path = "out";
  std::string data_path = "data";
  std::string device = "ipu";
  std::string target = "ipu2";
  std::vector<std::string> target_overrides;
  std::string report_dir;  // profile reports, one subdirectory per compiled program
  int64_t replicas = 0;    // over all instances; 0: one per instance
  int64_t max_samples = -1, max_val_samples = -1, local_batch = 0, steps_per_iter = 0;
  uint64_t seed = 42;
  int threads = 0;
  std::string checkpoint;  // "": <outPath>/checkpoint.h5
  bool profile = true;
  bool scaling_report = false;
  bool compile_only = false;
  std::string config;
  int64_t kill_rank_at = -1;  // test hook: rank 1 dies (SIGKILL) at this host batch of epoch 1
};

// The total loss and sample count of a pass, summed over instances.
struct LossSum {
  double loss_sum = 0;  // sum over micro-batches of their mean loss x rows
  double rows = 0;
  void add(double mean, int64_t n) {
    loss_sum += mean * static_cast<double>(n);
    rows += static_cast<double>(n);
  }
  double mean(dist::Communicator& comm) const {
    double v[2] = {loss_sum, rows};
    comm.allreduce_sum(v, 2);
    return v[1] > 0 ? v[0] / v[1] : 0.0;
  }
};

// Squared error per parameter, and the targets' sums, over a split (all instances).
struct SplitErrors {
  std::vector<double> sq, y, y2;
  double rows = 0;
  explicit SplitErrors(int64_t p) : sq(size_t(p)), y(size_t(p)), y2(size_t(p)) {}
  void add(const Tensor& pred, const Tensor& target) {
    const auto a = pred.to_vector<float>(), b = target.to_vector<float>();
    const size_t p = sq.size();
    for (size_t i = 0; i < a.size(); ++i) {
      const double e = double(a[i]) - double(b[i]);
      sq[i % p] += e * e;
      y[i % p] += b[i];
      y2[i % p] += double(b[i]) * double(b[i]);
    }
    rows += double(a.size() / p);
  }
  void reduce(dist::Communicator& comm) {
    std::vector<double> all;
    for (auto* v : {&sq, &y, &y2}) all.insert(all.end(), v->begin(), v->end());
    all.push_back(rows);
    comm.allreduce_sum(all.data(), static_cast<int64_t>(all.size()));
    const size_t p = sq.size();
    for (size_t k = 0; k < 3; ++k)
      std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(k * p), p,
                  (k == 0   ? sq
                   : k == 1 ? y
                            : y2)
                      .begin());
    rows = all.back();
  }
  double mse(size_t k) const { return rows > 0 ? sq[k] / rows : 0.0; }
  double mse() const {
    double s = 0;
    for (size_t k = 0; k < sq.size(); ++k) s += mse(k);
    return s / double(sq.size());
  }
  // The variance of the targets averaged over parameters: the MSE of predicting their mean.
  double variance() const {
    double s = 0;
    for (size_t k = 0; k < sq.size(); ++k) {
      const double m = y[k] / rows;
      s += y2[k] / rows - m * m;
    }
    return s / double(sq.size());
  }
};

std::vector<std::string> read_par_names(const fs::path& meta,
                                        const datasets::CellSpikeSplitInfo& info) {
  std::vector<std::string> names;
  if (fs::exists(meta)) {
    try {
      const YAML::Node y = YAML::LoadFile(meta.string());
      IPUML_CHECK(!y["numPar"] || y["numPar"].as<int64_t>() == info.params,
                  "ipuml-neuron-inverter: ", meta.string(), " says numPar ",
                  y["numPar"].as<int64_t>(), " but the data has ", info.params);
      IPUML_CHECK(!y["numTimeBin"] || y["numTimeBin"].as<int64_t>() == info.time_bins,
                  "ipuml-neuron-inverter: ", meta.string(), " says numTimeBin ",
                  y["numTimeBin"].as<int64_t>(), " but the data has ", info.time_bins);
      if (y["parName"]) names = y["parName"].as<std::vector<std::string>>();
    } catch (const YAML::Exception& e) {
      fail("ipuml-neuron-inverter: cannot read ", meta.string(), ": ", e.what());
    }
  }
  names.resize(static_cast<size_t>(info.params));
  for (size_t k = 0; k < names.size(); ++k)
    if (names[k].empty()) names[k] = "par" + std::to_string(k);
  return names;
}

Options execution_options(const Config& cfg, int64_t iterations, int64_t replicas) {
  Options o;
  o.deviceIterations(iterations)
      .replicationFactor(replicas)
      .randomSeed(cfg.seed)
      .useIpuModel(cfg.device == "ipu")
      .target(cfg.target)
      .showCompilationProgressBar(false);
  examples::apply_target_overrides(o, cfg.target_overrides, "ipuml-neuron-inverter");
  if (!cfg.report_dir.empty()) o.autoReportDirectory(cfg.report_dir);
  return o;
}

// Epoch state saved beside the checkpoint (the scheduler and the history the plots show).
nlohmann::json scheduler_json(const optim::LinearWarmupThenPlateau& s) {
  auto one = [](const optim::SchedulerState& st) {
    return nlohmann::json{{"last_epoch", st.last_epoch},
                          {"base_lrs", st.base_lrs},
                          {"last_lrs", st.last_lrs},
                          {"best", st.best},
                          {"num_bad_epochs", st.num_bad_epochs},
                          {"cooldown_counter", st.cooldown_counter}};
  };
  const auto [a, b] = s.full_state();
  return {one(a), one(b)};
}
void load_scheduler_json(optim::LinearWarmupThenPlateau& s, const nlohmann::json& j) {
  auto one = [](const nlohmann::json& k) {
    optim::SchedulerState st;
    st.last_epoch = k.at("last_epoch");
    st.base_lrs = k.at("base_lrs").get<std::vector<double>>();
    st.last_lrs = k.at("last_lrs").get<std::vector<double>>();
    // JSON has no infinity: a plateau detector that has seen nothing yet saved null.
    st.best = k.at("best").is_null() ? std::numeric_limits<double>::infinity()
                                     : k.at("best").get<double>();
    st.num_bad_epochs = k.at("num_bad_epochs");
    st.cooldown_counter = k.at("cooldown_counter");
    return st;
  };
  s.load_full_state({one(j.at(0)), one(j.at(1))});
}

// The mean gradient over instances before an eager step (the compiled path does this inside
// trainingModel).
void allreduce_grads(const std::vector<Tensor>& params, dist::Communicator& comm,
                     std::vector<float>& buf) {
  if (comm.size() == 1) return;
  int64_t n = 0;
  for (auto& p : params) n += p.numel();
  buf.assign(static_cast<size_t>(n), 0.0f);
  float* at = buf.data();
  for (auto& p : params) {
    if (p.grad().defined()) std::copy_n(p.grad().contiguous().data_ptr<float>(), p.numel(), at);
    at += p.numel();
  }
  comm.allreduce_sum(buf.data(), n);
  const float scale = 1.0f / static_cast<float>(comm.size());
  at = buf.data();
  NoGradGuard ng;
  for (Tensor p : params) {
    Tensor g = empty(p.shape(), kFloat32);
    float* gd = g.data_ptr<float>();
    for (int64_t i = 0; i < p.numel(); ++i) gd[i] = at[i] * scale;
    p.set_grad(g);
    at += p.numel();
  }
}

// The design with the command line's overrides.
Design design_of(const Config& cfg) {
  Design d = load_design(cfg.design);
  if (cfg.epochs > 0) d.epochs = cfg.epochs;
  if (cfg.init_lr > 0) d.init_lr = cfg.init_lr;
  if (cfg.max_samples >= 0) d.max_samples = cfg.max_samples;
  if (cfg.max_val_samples >= 0) d.max_val_samples = cfg.max_val_samples;
  if (cfg.local_batch > 0) d.local_batch = cfg.local_batch;
  if (cfg.steps_per_iter > 0) d.steps_per_iter = cfg.steps_per_iter;
  return d;
}

// --compile-only: the training step of the design, traced, compiled and estimated for
// --replication-factor replicas (1 by default) in one instance, with the throughput in the
// original's unit.
int compile_only(const Config& cfg) {
  const Design d = design_of(cfg);
  const int64_t replicas = std::max<int64_t>(cfg.replicas, 1);
  manual_seed(cfg.seed);
  models::NeuronInverter net(d.model);
  optim::AdamW optimizer(
      net->parameters(),
      optim::AdamWOptions(d.init_lr * static_cast<double>(replicas)).weight_decay(d.weight_decay));
  Options o = execution_options(cfg, d.steps_per_iter, replicas);
  examples::apply_target_overrides(o, cfg.target_overrides, "ipuml-neuron-inverter");
  o.compileOnly(true);
  auto tm = trainingModel(net.ptr(), o, optimizer, models::neuron_inverter_loss);
  const int64_t rows = o.combined_batch(d.local_batch);
  const auto e = examples::print_compile_only(
      tm, examples::batch_shaped({rows, d.model.num_time_bins(), d.model.num_features()}, kFloat32),
      examples::batch_shaped({rows, d.model.num_outputs()}, kFloat32));
  std::cout << "Projected: Avg samp/msec/IPU "
            << fixed(e.samples_per_second() / 1e3 / double(replicas), 2) << " simulated on "
            << cfg.target << " (" << replicas << " replica" << (replicas == 1 ? "" : "s") << ")\n";
  return 0;
}

int run(const Config& cfg) {
  if (cfg.compile_only) return compile_only(cfg);
  const auto t_start = Clock::now();
  auto comm = dist::world();
  const int rank = comm->rank(), instances = comm->size();
  const bool lead = rank == 0;
  int64_t replicas = cfg.replicas;
  if (replicas == 0)
    if (const char* env = std::getenv("IPUML_NUM_REPLICAS")) replicas = std::atoll(env);
  if (replicas == 0) replicas = instances;
  IPUML_CHECK(replicas >= instances && replicas % instances == 0,
              "ipuml-neuron-inverter: ", replicas, " replicas do not divide evenly over ",
              instances, " instances (each instance runs replicas / instances local replicas)");
  const int64_t local = replicas / instances;
  IPUML_CHECK(cfg.device != "eager" || local == 1,
              "ipuml-neuron-inverter: --device eager runs one "
              "replica per instance, got ",
              local, " (use --device ipu or cpu)");
  if (cfg.threads > 0) set_num_threads(cfg.threads);

  const Design d = design_of(cfg);
  // As the original: the initial LR grows with the number of IPUs (replicas).
  const double lr = d.init_lr * static_cast<double>(replicas);

  const fs::path data_file = fs::path(cfg.data_path) / datasets::cellspike_data_file(cfg.cell);
  IPUML_CHECK(fs::exists(data_file), "ipuml-neuron-inverter: no data file ", data_file.string(),
              " (make one with ipuml-cellspike-gen --outPath ", cfg.data_path, " --cellName ",
              cfg.cell, ")");
  const auto info =
      datasets::inspect_cellspike(data_file.string(), "train", d.model.num_time_bins(),
                                  d.model.num_features(), d.model.num_outputs());
  const auto par_names =
      read_par_names(fs::path(cfg.data_path) / datasets::cellspike_meta_file(cfg.cell), info);

  datasets::CellSpikeLoader train(data_file.string(), datasets::CellSpikeLoaderOptions()
                                                          .split("train")
                                                          .micro_batch(d.local_batch)
                                                          .steps_per_batch(d.steps_per_iter)
                                                          .num_shards(replicas)
                                                          .first_shard(rank * local)
                                                          .local_shards(local)
                                                          .max_samples(d.max_samples)
                                                          .seed(cfg.seed));
  // Validation and test: each instance evaluates its contiguous share, in file order.
  auto eval_loader = [&](const std::string& split, int64_t max_samples) {
    const auto si = datasets::inspect_cellspike(data_file.string(), split);
    const int64_t used = max_samples > 0 ? std::min(max_samples, si.samples) : si.samples;
    IPUML_CHECK(used / instances >= d.local_batch, "ipuml-neuron-inverter: the ", used, " ", split,
                " samples give each of ", instances, " instances fewer than one batch of ",
                d.local_batch);
    // One micro-batch per call: at most local_batch - 1 samples per instance left out, and the
    // same micro-batches (BatchNorm uses their statistics) however many instances share the work.
    const int64_t steps = 1;
    return datasets::CellSpikeLoader(data_file.string(), datasets::CellSpikeLoaderOptions()
                                                             .split(split)
                                                             .micro_batch(d.local_batch)
                                                             .steps_per_batch(steps)
                                                             .num_shards(instances)
                                                             .first_shard(rank)
                                                             .max_samples(max_samples)
                                                             .shuffle(false));
  };
  datasets::CellSpikeLoader val = eval_loader("val", d.max_val_samples);
  datasets::CellSpikeLoader test = eval_loader("test", d.max_val_samples);

  manual_seed(cfg.seed);
  models::NeuronInverter net(d.model);
  optim::AdamW optimizer(net->parameters(), optim::AdamWOptions(lr).weight_decay(d.weight_decay));
  optim::LinearWarmupThenPlateau scheduler(
      optimizer, d.warmup,
      optim::ReduceLROnPlateauOptions().factor(d.factor).patience(d.patience).cooldown(d.cooldown));
  int64_t params = 0;
  for (auto& p : net->parameters()) params += p.numel();

  if (lead) {
    std::cout << *net << "\n";
    std::cout << "design " << d.name << ": " << params << " parameters, " << d.epochs
              << " epochs, local batch " << d.local_batch << ", " << d.steps_per_iter
              << " device iterations, warm-up " << d.warmup << ", AdamW lr " << d.init_lr << " x "
              << replicas << " replicas = " << lr << ", plateau patience " << d.patience
              << " factor " << d.factor << "\n";
    std::cout << "data " << data_file.string() << " (" << io::dtype_name(info.frames_dtype)
              << "): " << info.samples << " train samples, " << train.shard_size()
              << " per replica, " << train.size() << " host batches of " << train.batch_rows()
              << " per instance per epoch\n";
    std::cout << "instances " << instances << " (" << comm->backend() << "), replicas " << replicas
              << " (" << local << " per instance), device " << cfg.device
              << (cfg.device == "ipu" ? " (emulated " + cfg.target + ")" : std::string()) << "\n"
              << std::flush;
  }

  const fs::path out = cfg.out_path;
  if (lead) fs::create_directories(out);
  const std::string ckpt =
      cfg.checkpoint.empty() ? (out / "checkpoint.h5").string() : cfg.checkpoint;
  const std::string state_file = ckpt + ".json";
  examples::TrainingHistory history;
  int64_t first_epoch = 0;
  if (fs::exists(ckpt) && fs::exists(state_file)) {
    nn::StateDict opt_state;
    first_epoch = io::load_checkpoint(ckpt, *net, &opt_state);
    optimizer.load_state_dict(opt_state);
    std::ifstream f(state_file);
    const nlohmann::json j = nlohmann::json::parse(f);
    load_scheduler_json(scheduler, j.at("scheduler"));
    history = examples::TrainingHistory::from_json(j.at("history"));
    if (lead) std::cout << "Resumed from " << ckpt << " after epoch " << first_epoch << "\n";
  }

  const bool compiled = cfg.device != "eager";
  Options train_opts = execution_options(cfg, d.steps_per_iter, local);
  train_opts.outputMode(OutputMode::All);
  if (instances > 1) train_opts.Distributed.setCommunicator(comm);
  std::optional<runtime::TrainingModel> tm;
  std::optional<runtime::InferenceModel> im;
  if (compiled) {
    tm.emplace(net.ptr(), train_opts, optimizer, models::neuron_inverter_loss);
    im.emplace(net.ptr(),
               execution_options(cfg, val.options().steps_per_batch(), 1).modelName("validation"));
  }
  examples::Progress progress(lead && instances == 1);  // mpirun gives ranks a pty

  // Predictions of a split, through the inference model or eagerly.
  auto evaluate = [&](datasets::CellSpikeLoader& loader, uint64_t epoch) {
    SplitErrors err(info.params);
    loader.start_epoch(epoch);
    data::Example b;
    int64_t n = 0;
    while (loader.next(b)) {
      Tensor pred;
      if (compiled) {
        pred = (*im)(b.data);
      } else {
        net->eval();
        NoGradGuard ng;
        std::vector<Tensor> parts;
        const int64_t mb = loader.options().micro_batch();
        for (int64_t r = 0; r < b.data.size(0); r += mb)
          parts.push_back(net(b.data.narrow(0, r, mb)));
        pred = cat(parts, 0);
        net->train();
      }
      err.add(pred, b.target);
      progress.update("Evaluating ", loader.options().split(), " [", ++n, "/", loader.size(), "]");
    }
    progress.done();
    err.reduce(*comm);
    return err;
  };

  std::vector<float> grad_buf;
  double wall_total = 0, sim_total = 0;
  int64_t samples_total = 0;
  for (int64_t epoch = first_epoch; epoch < d.epochs; ++epoch) {
    manual_seed(cfg.seed + 1000003ULL * static_cast<uint64_t>(epoch + 1));
    train.start_epoch(static_cast<uint64_t>(epoch));
    const double lr_now = optimizer.get_lr(0);
    LossSum tl;
    double train_wall = 0, simulated = 0;
    bool have_sim = compiled;
    int64_t b = 0, samples = 0;
    const auto t0 = Clock::now();
    data::Example batch;
    while (train.next(batch)) {
      if (cfg.kill_rank_at >= 0 && rank == 1 && epoch == first_epoch && b == cfg.kill_rank_at) {
        std::cerr << "ipuml-neuron-inverter: rank 1 kills itself (--test-kill-rank1-at)\n";
        std::raise(SIGKILL);
      }
      const auto ts = Clock::now();
      if (compiled) {
        const Tensor losses = (*tm)(batch.data, batch.target);
        for (float l : losses.to_vector<float>()) tl.add(l, d.local_batch);
        if (tm->last_stats().simulated_seconds)
          simulated += *tm->last_stats().simulated_seconds;
        else
          have_sim = false;
      } else {
        for (int64_t s = 0; s < d.steps_per_iter; ++s) {
          const Tensor x = batch.data.narrow(0, s * d.local_batch, d.local_batch);
          const Tensor y = batch.target.narrow(0, s * d.local_batch, d.local_batch);
          optimizer.zero_grad();
          Tensor loss = models::neuron_inverter_loss(net(x), y);
          loss.backward();
          allreduce_grads(optimizer.parameters(), *comm, grad_buf);
          optimizer.step();
          tl.add(loss.item<float>(), d.local_batch);
        }
      }
      train_wall += seconds_since(ts);
      samples += batch.data.size(0);
      ++b;
      progress.update("Epoch ", epoch + 1, "/", d.epochs, " [", b, "/", train.size(), "] loss ",
                      fixed(tl.loss_sum / std::max(tl.rows, 1.0), 4));
    }
    progress.done();
    const double train_loss = tl.mean(*comm);
    const SplitErrors ve = evaluate(val, 0);
    const double epoch_secs = seconds_since(t0);
    scheduler.step(ve.mse());
    // samples/ms/IPU: all instances' samples over the slowest instance's time, per replica.
    double agg[2] = {static_cast<double>(samples), train_wall};
    comm->allreduce_sum(agg, 2);
    const double all_samples = agg[0], wall = agg[1] / instances;
    const double per_ipu_wall = all_samples / (wall * 1e3) / static_cast<double>(replicas);
    const double per_ipu_sim = have_sim && simulated > 0
                                   ? all_samples / (simulated * 1e3) / static_cast<double>(replicas)
                                   : 0;
    wall_total += wall;
    sim_total += simulated;
    samples_total += static_cast<int64_t>(all_samples);
    const auto rs = train.stats();
    examples::EpochRecord rec{epoch + 1,  train_loss,   ve.mse(),   lr_now,
                              epoch_secs, per_ipu_wall, per_ipu_sim};
    history.epochs.push_back(rec);
    if (lead) {
      std::cout << "Epoch " << epoch + 1 << "/" << d.epochs << ": train loss "
                << fixed(train_loss, 5) << ", val loss " << fixed(ve.mse(), 5)
                << " (target variance " << fixed(ve.variance(), 5) << "), LR " << lr_now << ", "
                << fixed(epoch_secs, 1) << " s, Avg samp/msec/IPU " << fixed(per_ipu_wall, 3)
                << " wall";
      if (per_ipu_sim > 0) std::cout << ", " << fixed(per_ipu_sim, 2) << " simulated";
      std::cout << "; read " << fixed(rs.megabytes_per_second(), 0) << " MB/s" << std::endl;
      if (epoch == first_epoch && cfg.profile && cfg.device == "ipu")
        tm->printProfileSummary(std::cout);
      io::save_checkpoint(ckpt, *net, optimizer.state_dict(), epoch + 1);
      const nlohmann::json st = {{"scheduler", scheduler_json(scheduler)},
                                 {"history", history.to_json()}};
      const std::string tmp = state_file + ".tmp";
      std::ofstream(tmp) << st.dump(1);
      fs::rename(tmp, state_file);
      history.write_csv((out / "scalars.csv").string());
      history.write_html((out / "training.html").string(), d.name + " on " + cfg.cell);
    }
  }

  const SplitErrors te = evaluate(test, 0);
  if (lead) {
    std::cout << "Test loss per parameter (MSE):\n";
    for (size_t k = 0; k < par_names.size(); ++k)
      std::cout << "  " << par_names[k]
                << std::string(12 - std::min<size_t>(11, par_names[k].size()), ' ')
                << fixed(te.mse(k), 5) << "\n";
    std::cout << "Test loss " << fixed(te.mse(), 5) << " over " << static_cast<int64_t>(te.rows)
              << " samples; target variance " << fixed(te.variance(), 5) << "\n";
    if (samples_total > 0) {
      std::cout << "Training throughput: " << fixed(samples_total / (wall_total * 1e3), 3)
                << " samples/ms wall over " << replicas << " replicas";
      if (sim_total > 0)
        std::cout << ", " << fixed(samples_total / (sim_total * 1e3) / replicas, 2)
                  << " samples/ms/IPU simulated on " << cfg.target;
      std::cout << "\n";
    }
    const auto rs = train.stats();
    std::cout << "Training data read: " << fixed(rs.bytes / 1e6, 1) << " MB in "
              << fixed(rs.read_seconds, 2) << " s of reads (" << fixed(rs.megabytes_per_second(), 0)
              << " MB/s)\n";
    std::cout << "Wall time: " << fixed(seconds_since(t_start), 1) << " s" << std::endl;
  }

  if (cfg.scaling_report && lead && cfg.device == "ipu") {
    // Simulated data parallelism on the emulator: one host batch per replica count, on a fresh
    // model (the trained weights stay as they are).
    std::cout << "Scaling (emulated " << cfg.target << ", local batch " << d.local_batch << ", "
              << d.steps_per_iter << " device iterations):\n  replicas  samp/msec/IPU  "
              << "samp/msec total  efficiency\n";
    train.start_epoch(0);
    data::Example one;
    train.next(one);
    const int64_t rows = d.local_batch * d.steps_per_iter;
    double base = 0;
    for (int64_t r : {1, 2, 4, 8}) {
      manual_seed(cfg.seed);
      models::NeuronInverter fresh(d.model);
      optim::AdamW o2(fresh->parameters(), optim::AdamWOptions(lr).weight_decay(d.weight_decay));
      Options so = execution_options(cfg, d.steps_per_iter, r);
      so.autoReportDirectory("");  // the study's programs are not the run's
      auto stm = trainingModel(fresh.ptr(), so, o2, models::neuron_inverter_loss);
      std::vector<Tensor> xs, ys;
      for (int64_t k = 0; k < r; ++k) {
        xs.push_back(one.data.narrow(0, 0, rows));
        ys.push_back(one.target.narrow(0, 0, rows));
      }
      stm(cat(xs, 0), cat(ys, 0));
      const double per = r * rows / (*stm.last_stats().simulated_seconds * 1e3) / r;
      if (r == 1) base = per;
      std::cout << "  " << r << std::string(10 - std::to_string(r).size(), ' ') << fixed(per, 2)
                << std::string(9, ' ') << fixed(per * r, 2) << std::string(10, ' ')
                << fixed(100 * per / base, 1) << " %\n";
    }
  }
  comm->barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{
      "ipuml-neuron-inverter: the Neuron-Inverter on cellSpike HDF5 data (train_replica.py)"};
  app.add_option("--design", cfg.design, "hpar_gc4, hpar_dev, or a design yaml file")
      ->capture_default_str();
  app.add_option("--epochs", cfg.epochs, "Epochs (default: the design's max_epochs)")
      ->check(examples::integer_at_least(1));
  app.add_option("--cellName", cfg.cell,
                 "Cell: the data is <dataPath>/<cellName>_excite.cellSpike_4prB8kHz.data.h5")
      ->capture_default_str();
  app.add_option("--initLR", cfg.init_lr,
                 "Initial learning rate per replica (default: the design's; x replicas)")
      ->check(examples::number_above(0));
  app.add_option("--outPath", cfg.out_path, "Where logs, plots and checkpoints go")
      ->capture_default_str();
  app.add_option("--dataPath", cfg.data_path, "Directory of the cellSpike files")
      ->capture_default_str();
  app.add_option("--device", cfg.device, "ipu (emulated), cpu (compiled, CPU executor) or eager")
      ->check(CLI::IsMember({"ipu", "cpu", "eager"}))
      ->capture_default_str();
  app.add_option("--target", cfg.target, "Emulated IPU target: ipu1, ipu2, bow, tiny")
      ->capture_default_str();
  app.add_option("--set", cfg.target_overrides, "Override a target field (repeatable)");
  examples::add_report_dir_option(app, cfg.report_dir);
  app.add_option(
         "--replication-factor,--num-replicas", cfg.replicas,
         "Replicas over all instances (default: $IPUML_NUM_REPLICAS, else one per instance)")
      ->check(examples::integer_at_least(0));
  app.add_option("--maxSamples", cfg.max_samples,
                 "Training samples per epoch over all replicas (default: the design's; 0: all)");
  app.add_option("--maxValSamples", cfg.max_val_samples,
                 "Validation and test samples (default: the design's; 0: all)");
  app.add_option("--localBS", cfg.local_batch,
                 "Local (per replica) batch size (default: the design's)")
      ->check(examples::integer_at_least(0));
  app.add_option("--stepsPerIter", cfg.steps_per_iter,
                 "Device iterations per host batch (default: the design's replica_steps_per_iter)")
      ->check(examples::integer_at_least(0));
  app.add_option("--seed", cfg.seed, "Seed of initialisation, shuffles and dropout")
      ->capture_default_str();
  app.add_option("--threads", cfg.threads, "Worker threads per instance (0: all cores)")
      ->check(examples::integer_at_least(0));
  app.add_option("--checkpoint", cfg.checkpoint,
                 "HDF5 checkpoint (default <outPath>/checkpoint.h5): saved every epoch by rank 0, "
                 "resumed from when it exists");
  bool no_profile = false;
  app.add_flag("--no-profile", no_profile, "Skip the profile summary");
  app.add_flag("--scaling-report", cfg.scaling_report,
               "Print simulated samples/ms/IPU for 1, 2, 4 and 8 replicas (--device ipu)");
  app.add_option("--test-kill-rank1-at", cfg.kill_rank_at,
                 "Testing: rank 1 kills itself at this host batch of the first epoch")
      ->group("");
  app.add_flag("--compile-only", cfg.compile_only, examples::kCompileOnlyHelp);
  // The designs as --config presets too, as Graphcore's examples name their configurations.
  static const std::vector<examples::ConfigPreset> presets = {
      {"hpar_gc4",
       "the hpar_gc4 design: local batch 192, 30 device iterations, 161 epochs",
       {{"--design", "hpar_gc4"}}},
      {"hpar_dev",
       "the hpar_dev design: a smaller model, local batch 16, 7 epochs",
       {{"--design", "hpar_dev"}}},
  };
  examples::add_config_option(app, cfg.config, presets);
  const char* who = "ipuml-neuron-inverter";
  if (auto rc = examples::parse_command_line(app, argc, argv, who, presets, cfg.config)) return *rc;
  cfg.profile = !no_profile;
  // The design and the target are checked before anything is printed or read.
  try {
    load_design(cfg.design);
    examples::check_target_overrides(cfg.target, cfg.target_overrides);
    examples::check_report_dir(who, cfg.report_dir);
    IPUML_CHECK(!cfg.compile_only || cfg.device == "ipu",
                "--compile-only estimates the emulated IPU: it needs --device ipu");
  } catch (const std::exception& e) {
    return examples::usage_error(who, e.what());
  }
  try {
    return run(cfg);
  } catch (const std::exception& e) {
    examples::run_error(who, e.what());
    // Other instances may be waiting in a collective: end the whole job rather than leave them.
    try {
      if (ipuml::dist::world()->size() > 1) ipuml::dist::world()->abort(1);
    } catch (const std::exception&) {
    }
    return 1;
  }
}
