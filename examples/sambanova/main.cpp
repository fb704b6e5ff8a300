// ipuml-sambanova: a SambaFlow app on the emulated SambaNova RDU, as `srun python lenet.py ...`:
//   ipuml-sambanova lenet compile -b 1 --pef-name lenet --output-folder pef [--num-tiles 4]
//   ipuml-sambanova lenet run --pef pef/lenet/lenet.pef
//   ipuml-sambanova lenet test --pef pef/lenet/lenet.pef
//   ipuml-sambanova lenet measure-performance --pef pef/lenet/lenet.pef
// compile traces the model's training (or inference) step, cuts it into sections for the tiles
// it asks for and writes a PEF (the model's configuration, batch, target, section plan and the
// SHA-256 of the step's graph); run, test and measure-performance rebuild the model the PEF names,
// refuse a PEF whose graph is not the step they trace, and train, compare the RDU against the
// host CPU, or time it, with SambaFlow's log lines and simulated RDU rates beside wall-clock ones.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/backends/sambanova/pef.hpp>
#include <ipuml/backends/sambanova/sambanova_backend.hpp>
#include <ipuml/core/sha256.hpp>
#include <ipuml/datasets/generated_masks.hpp>
#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/dist/communicator.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/ffn_mnist.hpp>
#include <ipuml/models/gpt2.hpp>
#include <ipuml/models/lenet.hpp>
#include <ipuml/models/logistic_regression.hpp>
#include <ipuml/models/unet.hpp>

#include "compile_only.hpp"
#include "example_support.hpp"

using namespace ipuml;
using examples::fixed;
using examples::seconds_since;
using json = nlohmann::json;
using runtime::Tensors;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

constexpr const char* kWho = "ipuml-sambanova";
const std::vector<std::string> kModels{"lenet", "ffn_mnist", "logreg", "unet", "gpt2"};
// One host call of every instance's step above this many FLOPs is sized, not executed: at the
// tens of GFLOP/s a few host cores give, it would take minutes a step.
constexpr double kExecutableFlops = 1e12;

// --- The command line ---------------------------------------------------------------------

// A model flag: its name on the command line, its key in the PEF's model_config, the models
// that take it, and the option that reads it (one per subcommand that takes model flags).
struct ModelFlag {
  std::string name, key;
  std::vector<std::string> models;
  std::function<json()> value;
  CLI::Option* option = nullptr;
};

// The values model flags parse into; model_config takes those of the flags the model has.
struct ModelFlagValues {
  int64_t num_classes = 10, num_features = 784, ffn_dim_1 = 32, ffn_dim_2 = 32;
  bool bias = false;
  int64_t in_channels = 3, in_width = 256, in_height = 256, init_features = 32;
  bool enable_conv_tiling = false;
  std::string model_size = "xl";
  int64_t max_seq_length = 1024;
  bool bf16 = false;
  double momentum = 0, weight_decay = 0;
};

struct Cli {
  std::string model, command;
  ModelFlagValues flags;
  std::vector<ModelFlag> model_flags;  // of the subcommand given
  // compile
  int64_t batch = 1;
  CLI::Option* batch_option = nullptr;
  std::string pef_name, output_folder = "pef", target = "sn30", optimization = "o1";
  int64_t num_tiles = 0;  // 0: the whole RDU
  bool data_parallel = false, inference = false;
  int64_t world_size = 1;
  // run, test, measure-performance
  std::string pef, data_path, log_path;
  int64_t epochs = 1, iterations = 0, log_interval = 0, num_workers = 0;
  std::optional<double> lr;  // --lr when given
  double lr_flag = 0;
  bool reduce_on_rdu = false;
  uint64_t seed = 1;
};

// "lenet.py" is the app's script as SambaFlow users name it; "lenet" as well.
std::string model_name(std::string m) {
  if (m.size() > 3 && m.compare(m.size() - 3, 3, ".py") == 0) m.resize(m.size() - 3);
  if (m == "logistic_regression") m = "logreg";
  return m;
}

// SambaFlow's spellings CLI11 does not take as they are: "-b=1" (a short option with '='),
// "-ws 2" / "-ws=2" (two letters after one dash) and "-o0" / "-o1".
std::vector<std::string> normalized_args(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && (a == "-ws" || a.rfind("-ws=", 0) == 0)) {
      out.emplace_back("--world-size");
      if (a.size() > 3) out.push_back(a.substr(4));
      continue;
    }
    if (i > 0 && (a == "-o0" || a == "-o1")) {
      out.emplace_back("--optimization");
      out.push_back(a.substr(1));
      continue;
    }
    if (i > 0 && a.size() > 3 && a[0] == '-' && a[1] != '-' && a[2] == '=') {
      out.push_back(a.substr(0, 2));
      out.push_back(a.substr(3));
      continue;
    }
    out.push_back(std::move(a));
  }
  return out;
}

void add_model_flags(CLI::App* sub, Cli& cli) {
  auto& f = cli.flags;
  auto& list = cli.model_flags;
  const std::vector<std::string> mnist{"lenet", "ffn_mnist", "logreg"};
  auto add_int = [&](const std::string& name, const std::string& key, int64_t& v,
                     std::vector<std::string> models, const std::string& help, int64_t lo,
                     int64_t hi) {
    ModelFlag m{name, key, std::move(models), [&v] { return json(v); }};
    m.option = sub->add_option(name, v, help)->check(examples::integer_in(lo, hi));
    list.push_back(std::move(m));
  };
  auto add_bool = [&](const std::string& name, const std::string& key, bool& v,
                      std::vector<std::string> models, const std::string& help) {
    ModelFlag m{name, key, std::move(models), [&v] { return json(v); }};
    m.option = sub->add_flag(name, v, help);
    list.push_back(std::move(m));
  };
  add_int("--num-classes", "num_classes", f.num_classes, mnist,
          "Classes (lenet, ffn_mnist, logreg; default 10)", 1, int64_t{1} << 20);
  add_int("--num-features", "num_features", f.num_features, {"ffn_mnist", "logreg"},
          "Input features (ffn_mnist, logreg; default 784)", 1, int64_t{1} << 20);
  add_bool("--bias", "bias", f.bias, {"logreg"}, "logreg: a bias in lin_layer");
  add_int("--ffn-dim-1", "ffn_dim_1", f.ffn_dim_1, {"ffn_mnist"}, "ffn_mnist: gemm1's width (32)",
          1, int64_t{1} << 20);
  add_int("--ffn-dim-2", "ffn_dim_2", f.ffn_dim_2, {"ffn_mnist"}, "ffn_mnist: gemm2's width (32)",
          1, int64_t{1} << 20);
  add_int("--in-channels", "in_channels", f.in_channels, {"unet"}, "unet: image channels (3)", 1,
          4096);
  add_int("--in-width", "in_width", f.in_width, {"unet"}, "unet: image width (256)", 16, 16384);
  add_int("--in-height", "in_height", f.in_height, {"unet"}, "unet: image height (256)", 16, 16384);
  add_int("--init-features", "init_features", f.init_features, {"unet"},
          "unet: the first block's channels, doubled at each of 4 levels (32)", 1, 4096);
  add_bool("--enable-conv-tiling", "enable_conv_tiling", f.enable_conv_tiling, {"unet"},
           "unet: SambaFlow's compiler hint (accepted; ipuml tiles every operator whose weights "
           "exceed its PMUs)");
  {
    ModelFlag m{"--model-size", "model_size", {"gpt2"}, [&f] { return json(f.model_size); }};
    m.option = sub->add_option("--model-size", f.model_size, "gpt2: small, medium, large or xl")
                   ->check(CLI::IsMember({"small", "medium", "large", "xl"}));
    list.push_back(std::move(m));
  }
  add_int("--max_seq_length,--max-seq-length", "max_seq_length", f.max_seq_length, {"gpt2"},
          "gpt2: tokens per sample (1024)", 1, 1024);
  {
    ModelFlag m{"--bf16", "precision", kModels, [&f] { return json(f.bf16 ? "bf16" : "fp32"); }};
    m.option = sub->add_flag("--bf16,--mixed-precision", f.bf16,
                             "bfloat16 weights and activations with float32 master weights");
    list.push_back(std::move(m));
  }
  {
    ModelFlag m{"--momentum", "momentum", kModels, [&f] { return json(f.momentum); }};
    m.option = sub->add_option("--momentum", f.momentum, "SGD momentum (compiled into the step)")
                   ->check(examples::number_at_least(0));
    list.push_back(std::move(m));
  }
  {
    ModelFlag m{"--weight-decay", "weight_decay", kModels, [&f] { return json(f.weight_decay); }};
    m.option =
        sub->add_option("--weight-decay", f.weight_decay, "Weight decay (compiled into the step)")
            ->check(examples::number_at_least(0));
    list.push_back(std::move(m));
  }
}

// The model's configuration with every default, as compile records it when no flag is given:
// the tutorials' SGD settings for the starters (lenet.py as the ALCF guide runs it: --lr 0.01
// --momentum 0.0 --weight-decay 0.01; ffn_mnist.py and logreg.py: --lr 0.001 --weight-decay
// 1e-4), SGD with momentum for unet, AdamW for gpt2.
json default_config(const std::string& app) {
  const ModelFlagValues d;
  json c = json::object();
  if (app == "lenet") {
    c["num_classes"] = d.num_classes;
    c["momentum"] = 0.0, c["weight_decay"] = 0.01;
  } else if (app == "logreg") {
    c["num_features"] = d.num_features, c["num_classes"] = d.num_classes, c["bias"] = d.bias;
    c["momentum"] = 0.0, c["weight_decay"] = 1e-4;
  } else if (app == "ffn_mnist") {
    c["num_features"] = d.num_features, c["ffn_dim_1"] = d.ffn_dim_1;
    c["ffn_dim_2"] = d.ffn_dim_2, c["num_classes"] = d.num_classes;
    c["momentum"] = 0.0, c["weight_decay"] = 1e-4;
  } else if (app == "unet") {
    c["in_channels"] = d.in_channels, c["in_width"] = d.in_width, c["in_height"] = d.in_height;
    c["init_features"] = d.init_features, c["enable_conv_tiling"] = d.enable_conv_tiling;
    c["momentum"] = 0.9, c["weight_decay"] = 0.0;
  } else {
    c["model_size"] = d.model_size, c["max_seq_length"] = d.max_seq_length;
    c["momentum"] = 0.0, c["weight_decay"] = 0.01;
  }
  c["optimizer"] = app == "gpt2" ? "adamw" : "sgd";
  c["precision"] = "fp32";
  c["inference"] = false;
  return c;
}

double default_lr(const std::string& app) {
  if (app == "lenet" || app == "unet") return 0.01;
  if (app == "gpt2") return 1e-4;
  return 0.001;
}

// `base` with the model flags the command line gives; a flag the model does not take is a
// usage error naming the ones it does.
json with_given_flags(const Cli& cli, json base) {
  for (const ModelFlag& f : cli.model_flags) {
    if (f.option->count() == 0) continue;
    if (std::find(f.models.begin(), f.models.end(), cli.model) == f.models.end()) {
      std::string its;
      for (const ModelFlag& g : cli.model_flags)
        if (std::find(g.models.begin(), g.models.end(), cli.model) != g.models.end())
          its += (its.empty() ? "" : ", ") + g.name.substr(0, g.name.find(','));
      fail(f.name.substr(0, f.name.find(',')), " is not a flag of ", cli.model,
           " (its flags: ", its, ")");
    }
    base[f.key] = f.value();
  }
  return base;
}

// --- The models ---------------------------------------------------------------------------

// One app as the program runs it: the module, its forward and loss over tensor lists, batches of
// its shapes for compiling, and what it trains on.
struct Task {
  std::string app;
  json config;
  std::shared_ptr<nn::Module> model;
  runtime::ForwardFn forward;
  runtime::MultiLossFn loss;
  enum class Data { MnistImages, MnistFlat, Masks, Tokens } data = Data::MnistImages;
  std::optional<models::UNetConfig> unet;
  int64_t features = 784, classes = 10, seq = 0, vocab = 0;
  bool bf16 = false, inference = false, dropout = false;

  DType float_type() const { return bf16 ? kBFloat16 : kFloat32; }
  // Inputs and targets of `rows` samples, shapes only (compiling and sizing).
  std::pair<Tensors, Tensors> shaped(int64_t rows) const {
    const DType f = float_type();
    switch (data) {
      case Data::MnistImages:
        return {{examples::batch_shaped({rows, 1, 28, 28}, f)},
                {examples::batch_shaped({rows}, kInt64)}};
      case Data::MnistFlat:
        return {{examples::batch_shaped({rows, features}, f)},
                {examples::batch_shaped({rows}, kInt64)}};
      case Data::Masks:
        return {
            {examples::batch_shaped({rows, unet->in_channels(), unet->height(), unet->width()}, f)},
            {examples::batch_shaped({rows, 1, unet->height(), unet->width()}, f)}};
      case Data::Tokens: {
        const Tensor ids = examples::batch_shaped({rows, seq}, kInt64);
        return {{ids}, {ids}};
      }
    }
    fail("unreachable");
  }
  // A data batch as the model takes it: MNIST flattened for the linear models, in its precision.
  std::pair<Tensor, Tensor> prepare(const Tensor& data_in, const Tensor& target) const {
    Tensor x = data_in, y = target;
    if (data == Data::MnistFlat) x = reshape(x, {x.size(0), x.numel() / x.size(0)});
    if (bf16 && is_floating(x.dtype())) x = x.to(kBFloat16);
    if (bf16 && is_floating(y.dtype())) y = y.to(kBFloat16);
    return {x, y};
  }
};

int64_t get_int(const json& c, const char* key) { return c.at(key).get<int64_t>(); }

// Builds the app's model from its configuration (a PEF's or the command line's) on the current
// default device.
Task make_task(const std::string& app, const json& c) {
  Task t;
  t.app = app;
  t.config = c;
  const std::string precision = c.at("precision").get<std::string>();
  IPUML_CHECK(precision == "fp32" || precision == "bf16", "precision must be fp32 or bf16, got '",
              precision, "'");
  t.bf16 = precision == "bf16";
  t.inference = c.at("inference").get<bool>();
  auto single = [&t](auto m, auto loss_fn) {
    t.model = m.ptr();
    t.forward = [m](const Tensors& in) { return Tensors{m->forward(in[0])}; };
    t.loss = [loss_fn](const Tensors& out, const Tensors& y) { return loss_fn(out[0], y[0]); };
  };
  if (app == "lenet") {
    models::LeNetConfig lc;
    lc.num_classes(get_int(c, "num_classes"));
    single(models::LeNet(lc), models::lenet_loss);
    t.classes = lc.num_classes();
  } else if (app == "logreg") {
    models::LogRegConfig lc;
    lc.num_features(get_int(c, "num_features"))
        .num_classes(get_int(c, "num_classes"))
        .bias(c.at("bias").get<bool>());
    single(models::LogReg(lc), models::logreg_loss);
    t.data = Task::Data::MnistFlat;
    t.features = lc.num_features(), t.classes = lc.num_classes();
  } else if (app == "ffn_mnist") {
    models::FfnMnistConfig fc;
    fc.num_features(get_int(c, "num_features"))
        .ffn_dim_1(get_int(c, "ffn_dim_1"))
        .ffn_dim_2(get_int(c, "ffn_dim_2"))
        .num_classes(get_int(c, "num_classes"));
    single(models::FFNLogReg(fc), models::ffn_mnist_loss);
    t.data = Task::Data::MnistFlat;
    t.features = fc.num_features(), t.classes = fc.num_classes();
  } else if (app == "unet") {
    // ALCF's SambaNova UNet (the brain-segmentation UNet: --init-features F gives blocks of F,
    // 2F, 4F and 8F channels and a bottleneck of 16F, each 3x3 conv followed by BatchNorm2d
    // without a bias), one logit channel for binary segmentation.
    const int64_t f = get_int(c, "init_features");
    IPUML_CHECK(f >= 1 && f <= 4096, "init_features must be in [1, 4096], got ", f);
    models::UNetConfig uc;
    uc.in_channels(get_int(c, "in_channels"))
        .num_classes(1)
        .encoder_filters({f, 2 * f, 4 * f, 8 * f})
        .bottleneck(16 * f)
        .norm(true)
        .height(get_int(c, "in_height"))
        .width(get_int(c, "in_width"));
    (void)c.at("enable_conv_tiling").get<bool>();
    uc.validate();
    models::UNet m(uc);
    t.model = m.ptr();
    t.forward = [m](const Tensors& in) { return Tensors{m->forward(in[0])}; };
    t.loss = [m](const Tensors& out, const Tensors& y) { return m->loss(out[0], y[0]); };
    t.data = Task::Data::Masks;
    t.unet = uc;
  } else if (app == "gpt2") {
    const int64_t seq = get_int(c, "max_seq_length");
    models::GPT2Config gc = models::GPT2Config::preset(c.at("model_size").get<std::string>());
    IPUML_CHECK(seq >= 1 && seq <= gc.n_positions(), "max_seq_length must be in [1, ",
                gc.n_positions(), "], got ", seq);
    models::GPT2LMHeadModel m(gc);
    t.model = m.ptr();
    t.forward = [m](const Tensors& in) { return Tensors{m->forward(in[0])}; };
    t.loss = [](const Tensors& out, const Tensors& y) {
      return models::shifted_causal_lm_loss(out[0], y[0]);
    };
    t.data = Task::Data::Tokens;
    t.seq = seq, t.vocab = gc.vocab_size();
    t.dropout = true;
  } else {
    fail("unknown app '", app, "'");
  }
  if (t.bf16) t.model->bfloat16();
  if (t.inference) t.model->eval();
  return t;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Task& t, double lr) {
  const double momentum = t.config.at("momentum").get<double>();
  const double wd = t.config.at("weight_decay").get<double>();
  std::unique_ptr<optim::Optimizer> opt;
  if (t.config.at("optimizer").get<std::string>() == "adamw")
    opt = std::make_unique<optim::AdamW>(t.model->parameters(),
                                         optim::AdamWOptions(lr).weight_decay(wd));
  else
    opt = std::make_unique<optim::SGD>(t.model->parameters(),
                                       optim::SGDOptions(lr).momentum(momentum).weight_decay(wd));
  if (t.bf16) opt->keep_master_weights();
  return opt;
}

// --- The RDU ------------------------------------------------------------------------------

// What a PEF says about where it runs.
struct RduSetup {
  sambanova::Target target;
  int64_t num_tiles = 0, world_size = 1;
  std::string optimization = "o1";

  std::string describe() const {
    return target.name + ", " + std::to_string(num_tiles) + " of " +
           std::to_string(target.tiles_per_rdu) + " tiles, " + optimization;
  }
};

// The backend's options for `s`: the target as a preset and, where it differs from the preset,
// every field as an override.
Options rdu_options(const RduSetup& s, int64_t replicas) {
  Options o;
  o.showCompilationProgressBar(false).backend("sambanova").replicationFactor(replicas);
  bool preset = false;
  for (const std::string& n : sambanova::target_preset_names())
    preset = preset || n == s.target.name;
  const std::string base = preset ? s.target.name : "sn30";
  o.backendOption("sambanova", "target", base);
  if (sambanova::to_json(sambanova::target_preset(base)) != sambanova::to_json(s.target)) {
    std::string overrides;
    const json fields = json::parse(sambanova::to_json(s.target));
    for (const auto& [k, v] : fields.items())
      overrides += (overrides.empty() ? "" : ";") + k + "=" +
                   (v.is_string() ? v.get<std::string>() : v.dump());
    o.backendOption("sambanova", "target_overrides", overrides);
  }
  o.backendOption("sambanova", "num_tiles", std::to_string(s.num_tiles));
  o.backendOption("sambanova", "optimization", s.optimization);
  return o;
}

RduSetup setup_of(const sambanova::Pef& pef) {
  RduSetup s;
  s.target = sambanova::target_from_json(pef.target.dump());
  s.num_tiles = pef.num_tiles;
  s.world_size = pef.world_size;
  s.optimization = pef.optimization;
  IPUML_CHECK(s.num_tiles <= s.target.tiles_per_rdu, "the PEF asks for ", s.num_tiles,
              " tiles of an RDU of ", s.target.tiles_per_rdu);
  return s;
}

std::string graph_sha(const ir::Graph& g) { return to_hex(sha256(g.signature())); }

// The inference step as compile and run trace it: the forward pass alone.
ir::Graph trace_inference(Task& t, int64_t rows) {
  NoGradGuard ng;
  t.model->eval();
  ir::Tracer tracer;
  for (auto& [name, p] : t.model->named_parameters()) tracer.name_state(p, name);
  for (auto& [name, b] : t.model->named_buffers()) tracer.name_state(b, name);
  Tensors xs;
  for (const Tensor& x : t.shaped(rows).first)
    xs.push_back(tracer.input(ir::TensorMeta{x.shape(), x.dtype()}));
  return tracer.finish(t.forward(xs)).graph;
}

// The step compiled compile-only for one instance's batch on every instance of `s` (replicas in
// this process): the estimate, the section plan and the SHA-256 of the step's graph.
struct Sizing {
  runtime::Estimate estimate;
  sambanova::SectionPlan plan;
  std::string sha;
};

Sizing size_step(Task& t, double lr, const RduSetup& s, int64_t batch,
                 const std::string& report_dir = "") {
  Options o = rdu_options(s, s.world_size);
  o.compileOnly(true);
  if (!report_dir.empty()) o.autoReportDirectory(report_dir);
  Sizing z;
  const auto [x, y] = t.shaped(batch * s.world_size);
  if (t.inference) {
    auto im = inferenceModel(t.model, o, t.forward);
    z.estimate = im.estimate(x);
    const ir::Graph g = trace_inference(t, batch);
    z.sha = graph_sha(g);
    z.plan = sambanova::plan_sections(
        g, sambanova::RduModel(
               s.target, s.num_tiles,
               s.optimization == "o0" ? sambanova::Optimization::O0 : sambanova::Optimization::O1));
  } else {
    auto opt = make_optimizer(t, lr);
    auto tm = trainingModel(t.model, o, *opt, t.forward, t.loss);
    z.estimate = tm.estimate(x, y);
    z.plan = sambanova::rdu_executable(*tm.step_executable()).sections();
    z.sha = graph_sha(tm.step_graph());
  }
  return z;
}

// The app's model built on the meta device (no memory for its weights) and sized.
Sizing size_on_meta(const std::string& app, const json& config, double lr, const RduSetup& s,
                    int64_t batch, const std::string& report_dir = "") {
  std::optional<DefaultDeviceGuard> meta(std::in_place, kMeta);
  Task t = make_task(app, config);
  meta.reset();
  return size_step(t, lr, s, batch, report_dir);
}

std::string bytes_text(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) b /= 1000, ++u;
  return fixed(b, u == 0 ? 0 : 2) + " " + units[u];
}

// Simulated rates of one host call: every instance runs `batch` samples at once.
struct Rates {
  double latency_s = 0, per_instance = 0, total = 0;
};
Rates rates_of(const runtime::Estimate& e, int64_t batch, int64_t world_size) {
  Rates r;
  r.latency_s = e.call_seconds;
  r.per_instance = e.call_seconds > 0 ? double(batch) / e.call_seconds : 0;
  r.total = r.per_instance * double(world_size);
  return r;
}

std::string mode_text(const Task& t) {
  const std::string precision =
      t.bf16 ? "bf16 (bfloat16 weights and activations, float32 master weights)" : "fp32";
  if (t.inference) return "inference (the forward pass), " + precision;
  return "training (forward, loss, backward and the " +
         std::string(t.config.at("optimizer").get<std::string>() == "adamw" ? "AdamW" : "SGD") +
         " update), " + precision;
}

// Why a step is sized here but not executed; empty when it can run.
std::string too_big_to_execute(const Sizing& z, int64_t world_size) {
  const double flops = z.plan.flops * double(world_size);
  if (flops <= kExecutableFlops) return "";
  return "one step of its " + std::to_string(world_size) + " instance" +
         (world_size == 1 ? "" : "s") + " is " + fixed(flops / 1e12, 1) +
         " TFLOP, more than this host's CPU executes in reasonable time (at most " +
         fixed(kExecutableFlops / 1e12, 1) + " TFLOP a step); it is sized here: compile and " +
         "measure-performance give its sections, fit and simulated samples/s";
}

// --- compile ------------------------------------------------------------------------------

int compile_app(const Cli& cli) {
  const auto t0 = Clock::now();
  json config = with_given_flags(cli, default_config(cli.model));
  config["inference"] = cli.inference;
  RduSetup s;
  s.target = sambanova::target_preset(cli.target);
  s.num_tiles = cli.num_tiles > 0 ? cli.num_tiles : s.target.tiles_per_rdu;
  IPUML_CHECK(s.num_tiles <= s.target.tiles_per_rdu, "--num-tiles ", s.num_tiles, " exceeds the ",
              s.target.tiles_per_rdu, " tiles of an ", s.target.name, " RDU");
  s.optimization = cli.optimization;
  s.world_size = cli.world_size;
  const std::string name = cli.pef_name.empty() ? cli.model : cli.pef_name;
  const fs::path dir = fs::path(cli.output_folder) / name;
  const fs::path pef_path = dir / (name + ".pef");
  std::cout << "Compiling " << cli.model << " for " << s.describe() << ": batch " << cli.batch
            << " per instance, " << s.world_size << " instance" << (s.world_size == 1 ? "" : "s")
            << (s.world_size > 1 ? " (data parallel)" : "") << "\n";
  if (config.value("enable_conv_tiling", false))
    std::cout << "Note: --enable-conv-tiling is a SambaFlow compiler hint; ipuml's section "
                 "planner tiles every operator whose weights exceed its PMUs either way\n";
  Sizing z;
  try {
    z = size_on_meta(cli.model, config, default_lr(cli.model), s, cli.batch, dir.string());
  } catch (const Error& e) {
    if (config.at("precision") != "bf16") throw;
    fail(cli.model, " cannot be compiled in bf16 here: ", e.what(),
         " (compile it without --bf16 for fp32)");
  }
  const Task shown = [&] {
    DefaultDeviceGuard meta(kMeta);
    return make_task(cli.model, config);
  }();
  std::cout << sambanova::describe(z.plan);
  const Rates r = rates_of(z.estimate, cli.batch, s.world_size);
  const double compile_s = seconds_since(t0);
  if (!z.plan.fits) {
    std::cout << "Fit: does not fit: " << z.plan.message << "\n";
    std::cout << "Compile: " << fixed(compile_s, 2) << " s of wall clock on this host; no PEF "
              << "written\n";
    return examples::kExitFailure;
  }
  std::cout << "Fit: fits (" << bytes_text(z.plan.ddr_peak_bytes) << " of DDR at peak, "
            << bytes_text(z.plan.state_bytes) << " of it weights and optimizer state, of the "
            << bytes_text(z.plan.ddr_capacity_bytes) << " share of " << s.num_tiles << " tiles; "
            << z.plan.sections.size() << " sections)\n";
  std::cout << "Mode: " << mode_text(shown) << "\n";
  std::cout << "Projected: " << fixed(r.per_instance, 2) << " samples/s per instance, "
            << fixed(r.total, 2) << " samples/s for " << s.world_size << " instance"
            << (s.world_size == 1 ? "" : "s") << " (" << fixed(r.latency_s * 1e3, 3)
            << " ms a batch, simulated)\n";
  sambanova::Pef pef;
  pef.app = cli.model;
  pef.model_config = config;
  pef.batch_size = cli.batch;
  pef.target = json::parse(sambanova::to_json(s.target));
  pef.num_tiles = s.num_tiles;
  pef.optimization = s.optimization;
  pef.world_size = s.world_size;
  pef.graph_sha256 = z.sha;
  pef.sections = json::parse(sambanova::sections_json(z.plan)).at("sections");
  sambanova::write_pef(pef_path.string(), pef);
  std::cout << "Compile: " << fixed(seconds_since(t0), 2) << " s of wall clock on this host\n";
  std::cout << "PEF file " << pef_path.string() << " created (reports in " << dir.string() << ")\n";
  return 0;
}

// --- Loading a PEF ------------------------------------------------------------------------

struct Loaded {
  sambanova::Pef pef;
  RduSetup setup;
  json config;  // the PEF's, with the model flags this command gives
  int64_t batch = 1;
};

// Reads the PEF and refuses it, with pef_mismatch's sentence, when this command's app, model
// configuration, batch or ipuml differs from what it was compiled for.
Loaded load(const Cli& cli) {
  Loaded l;
  l.pef = sambanova::read_pef(cli.pef);
  l.config = with_given_flags(cli, l.pef.model_config);
  l.batch = cli.batch_option && cli.batch_option->count() > 0 ? cli.batch : l.pef.batch_size;
  sambanova::Pef now = l.pef;
  now.app = cli.model;
  now.model_config = l.config;
  now.batch_size = l.batch;
  now.ipuml_version = IPUML_VERSION_STRING;
  if (auto m = sambanova::pef_mismatch(cli.pef, l.pef, now); !m.empty()) fail(m);
  l.setup = setup_of(l.pef);
  return l;
}

// The step this run traced against the PEF's.
void check_graph(const Cli& cli, const Loaded& l, const std::string& sha) {
  sambanova::Pef now = l.pef;
  now.app = cli.model;
  now.model_config = l.config;
  now.batch_size = l.batch;
  now.ipuml_version = IPUML_VERSION_STRING;
  now.graph_sha256 = sha;
  if (auto m = sambanova::pef_mismatch(cli.pef, l.pef, now); !m.empty()) fail(m);
}

void print_loaded(const Cli& cli, const Loaded& l, const Task& t) {
  std::cout << "PEF " << cli.pef << ": " << l.pef.app << ", batch " << l.batch << " per instance, "
            << l.setup.world_size << " instance" << (l.setup.world_size == 1 ? "" : "s") << ", "
            << l.setup.describe() << ", " << mode_text(t) << "\n";
}

// --- Data ---------------------------------------------------------------------------------

// MNIST from --data-path (which must hold it), else ipuml's cache (scripts/fetch-data.sh), whose
// error says where it looked and how to fetch it.
std::string mnist_dir(const std::string& data_path) {
  if (data_path.empty()) return datasets::find_mnist_dir();
  return data_path;
}

datasets::GeneratedMasks masks(const Task& t, uint64_t seed, bool train) {
  datasets::GeneratedMasksOptions o;
  o.channels = t.unet->in_channels();
  o.height = t.unet->height();
  o.width = t.unet->width();
  o.seed = train ? seed : seed + 0x5eed;
  o.size = train ? 8192 : 512;
  return datasets::GeneratedMasks(o);
}

template <typename Fn>
auto with_data(const Task& t, const Cli& cli, bool train, Fn fn) {
  if (t.data == Task::Data::Masks) return fn(masks(t, cli.seed, train));
  IPUML_CHECK(t.data != Task::Data::Tokens, t.app,
              " reads no data set here (SambaNova's gpt2_pretrain reads tokenised text)");
  IPUML_CHECK(t.data != Task::Data::MnistFlat || t.features == 784, t.app, " has num_features ",
              t.features, ", but MNIST's images have 784 pixels (compile with --num-features 784)");
  IPUML_CHECK(t.classes >= 10, t.app, " has num_classes ", t.classes,
              ", but MNIST has 10 classes (compile with --num-classes 10)");
  return fn(datasets::normalized_mnist(mnist_dir(cli.data_path), train));
}

// Lines to the terminal and, with --log-path, to DIR/<app>.log.
class Log {
 public:
  Log(const std::string& dir, const std::string& app, bool enabled) : enabled_(enabled) {
    if (dir.empty() || !enabled) return;
    fs::create_directories(dir);
    file_.open(fs::path(dir) / (app + ".log"), std::ios::app);
    IPUML_CHECK(file_.good(), "--log-path: cannot write ",
                (fs::path(dir) / (app + ".log")).string());
  }
  void line(const std::string& s) {
    if (!enabled_) return;
    std::cout << s << std::endl;
    if (file_.is_open()) file_ << s << std::endl;
  }

 private:
  bool enabled_;
  std::ofstream file_;
};

struct Evaluation {
  double loss = 0, accuracy = 0, dice = 0, iou = 0;
  int64_t samples = 0;
  double simulated = 0;
};

// The test set through the model on the emulated RDU (an inference program of the PEF's target).
Evaluation evaluate(Task& t, const Cli& cli, const RduSetup& s) {
  Options o = rdu_options(s, 1);
  o.modelName("evaluation");
  t.model->eval();
  auto im = inferenceModel(t.model, o, t.forward);
  Evaluation ev;
  with_data(t, cli, false, [&](const auto& test_set) {
    const int64_t batch = t.data == Task::Data::Masks ? 16 : 1000;
    data::DataLoader loader(test_set, data::DataLoaderOptions().batch_size(batch));
    double loss_sum = 0;
    int64_t correct = 0;
    models::SegmentationCounts counts;
    for (auto& b : loader) {
      auto [x, y] = t.prepare(b.data, b.target);
      const Tensor out = im(Tensors{x})[0].to(kFloat32);
      const auto rows = b.data.size(0);
      if (t.data == Task::Data::Masks) {
        loss_sum += models::binary_cross_entropy_with_logits(out, b.target).template item<float>() *
                    double(rows);
        const auto c = models::segmentation_counts(out, b.target);
        counts.intersection += c.intersection;
        counts.predicted += c.predicted;
        counts.actual += c.actual;
      } else {
        loss_sum += cross_entropy(out, b.target).template item<float>() * double(rows);
        correct += sum(eq(argmax(out, 1), b.target).to(kInt64)).template item<int64_t>();
      }
      ev.samples += rows;
      if (im.last_stats().simulated_seconds) ev.simulated += *im.last_stats().simulated_seconds;
    }
    ev.loss = loss_sum / double(std::max<int64_t>(1, ev.samples));
    ev.accuracy = 100.0 * double(correct) / double(std::max<int64_t>(1, ev.samples));
    ev.dice = counts.dice(), ev.iou = counts.iou();
    return 0;
  });
  t.model->train();
  return ev;
}

std::string test_line(const Task& t, const Evaluation& ev) {
  if (t.data == Task::Data::Masks)
    return "Test Dice: " + fixed(ev.dice, 4) + " IoU: " + fixed(ev.iou, 4) +
           " Loss: " + fixed(ev.loss, 4);
  return "Test Accuracy: " + fixed(ev.accuracy, 2) + " Loss: " + fixed(ev.loss, 4);
}

// --- run ----------------------------------------------------------------------------------

int run_app(const Cli& cli) {
  const auto t_start = Clock::now();
  Loaded l = load(cli);
  IPUML_CHECK(cli.model != "gpt2",
              "gpt2 is sized here, not trained: ipuml reads no tokenised "
              "corpus for SambaNova's gpt2_pretrain; compile and measure-performance give its "
              "sections, fit and simulated samples/s");
  const double lr = cli.lr.value_or(default_lr(cli.model));
  const RduSetup& s = l.setup;
  auto comm = dist::world();
  const int64_t instances = comm->size();
  const bool lead = comm->rank() == 0;
  IPUML_CHECK(instances == 1 || instances == s.world_size, cli.pef, " was compiled for ",
              s.world_size, " data-parallel instance", s.world_size == 1 ? "" : "s",
              " (-ws); this run has ", instances, " ranks: launch ", s.world_size,
              " or compile again with --data-parallel -ws ", instances);
  // The PEF's step sized first, without memory: a step too large for this host is refused
  // before its weights are allocated.
  const Sizing z = size_on_meta(cli.model, l.config, lr, s, l.batch);
  check_graph(cli, l, z.sha);
  if (auto why = too_big_to_execute(z, s.world_size); !why.empty())
    fail(cli.model, " is not executed here: ", why);
  manual_seed(cli.seed);
  Task t = make_task(cli.model, l.config);
  Log log(cli.log_path, cli.model, lead);
  if (lead) print_loaded(cli, l, t);
  if (lead && cli.num_workers > 0)
    std::cout << "Note: --num-workers " << cli.num_workers
              << ": batches are assembled in this process\n";
  const int64_t local = instances > 1 ? 1 : s.world_size;
  if (lead && s.world_size > 1)
    std::cout << "Data parallel: " << s.world_size << " instances, "
              << (instances > 1 ? "one per MPI rank" : "replicas in this process")
              << "; gradients are all-reduced over the RDU links"
              << (cli.reduce_on_rdu ? " (--reduce-on-rdu)" : " (as --reduce-on-rdu does)")
              << " before each update\n";
  else if (lead && cli.reduce_on_rdu)
    std::cout << "Note: --reduce-on-rdu: one instance, nothing to reduce\n";
  if (t.inference) {
    const Evaluation ev = evaluate(t, cli, s);
    log.line(test_line(t, ev));
    if (ev.simulated > 0)
      std::cout << "Inference: " << ev.samples << " samples, simulated on the RDU at "
                << fixed(double(ev.samples) / ev.simulated, 1) << " samples/s\n";
    return 0;
  }
  auto opt = make_optimizer(t, lr);
  Options o = rdu_options(s, local);
  if (instances > 1) o.Distributed.setCommunicator(comm);
  auto tm = trainingModel(t.model, o, *opt, t.forward, t.loss);
  {
    const auto [x, y] = t.shaped(l.batch * local);
    tm.compile(x, y);
  }
  check_graph(cli, l, graph_sha(tm.step_graph()));
  double sim = 0, wall_train = 0;
  int64_t samples = 0;
  with_data(t, cli, true, [&](const auto& train_set) {
    data::DataLoader loader(train_set, data::DataLoaderOptions()
                                           .batch_size(l.batch * local)
                                           .shuffle(true)
                                           .seed(cli.seed)
                                           .drop_last(true)
                                           .replicas(instances)
                                           .rank(comm->rank()));
    IPUML_CHECK(loader.size() > 0, "batch ", l.batch * local, " exceeds the ", train_set.size(),
                " training samples");
    const int64_t steps =
        cli.iterations > 0 ? std::min<int64_t>(cli.iterations, loader.size()) : loader.size();
    const int64_t interval =
        cli.log_interval > 0 ? cli.log_interval : std::max<int64_t>(1, steps / 10);
    examples::Progress progress(lead && instances == 1);
    const auto t0 = Clock::now();
    for (int64_t epoch = 1; epoch <= cli.epochs; ++epoch) {
      int64_t step = 0;
      for (auto& b : loader) {
        if (step >= steps) break;
        auto [x, y] = t.prepare(b.data, b.target);
        const Tensor loss = tm(Tensors{x}, Tensors{y});
        ++step;
        samples += l.batch * local * instances;
        if (tm.last_stats().simulated_seconds) sim += *tm.last_stats().simulated_seconds;
        const double v = loss.to(kFloat32).mean().template item<float>();
        progress.update("Epoch ", epoch, " step ", step, "/", steps, " loss ", fixed(v, 4));
        if (step % interval == 0 || step == steps) {
          progress.done();
          log.line("Epoch [" + std::to_string(epoch) + "/" + std::to_string(cli.epochs) +
                   "], Step [" + std::to_string(step) + "/" + std::to_string(steps) +
                   "], Loss: " + fixed(v, 4));
        }
      }
    }
    progress.done();
    wall_train = seconds_since(t0);
    return 0;
  });
  if (lead) {
    std::cout << "Trained " << samples << " samples in " << fixed(wall_train, 2)
              << " s of wall clock here (" << fixed(double(samples) / std::max(wall_train, 1e-9), 1)
              << " samples/s)";
    if (sim > 0)
      std::cout << "; simulated on the RDU: " << fixed(sim, 4) << " s, "
                << fixed(double(samples) / double(s.world_size) / sim, 1)
                << " samples/s per instance, " << fixed(double(samples) / sim, 1)
                << " samples/s for " << s.world_size << " instance"
                << (s.world_size == 1 ? "" : "s");
    std::cout << std::endl;
    const Evaluation ev = evaluate(t, cli, s);
    log.line(test_line(t, ev));
    std::cout << "Wall time: " << fixed(seconds_since(t_start), 1) << " s" << std::endl;
  }
  if (instances > 1) comm->barrier();
  return 0;
}

// --- test ---------------------------------------------------------------------------------

struct Discrepancy {
  double abs = 0, rel = 0;
};

// The largest difference, and that difference over the host tensor's largest magnitude.
Discrepancy discrepancy(const Tensor& host, const Tensor& rdu) {
  IPUML_CHECK(host.shape() == rdu.shape(), "test: shapes differ: host ", shape_str(host.shape()),
              ", RDU ", shape_str(rdu.shape()));
  const auto a = host.to(kFloat32).contiguous().to_vector<float>();
  const auto b = rdu.to(kFloat32).contiguous().to_vector<float>();
  Discrepancy d;
  double scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d.abs = std::max(d.abs, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(a[i])));
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) d.abs = INFINITY;
  }
  d.rel = scale > 0 ? d.abs / scale : d.abs;
  return d;
}

// A test batch: the first `rows` samples of the test set, or random tokens for gpt2.
std::pair<Tensor, Tensor> test_batch(const Task& t, const Cli& cli, int64_t rows) {
  if (t.data == Task::Data::Tokens) {
    Generator gen(cli.seed);
    const Tensor ids = randint(0, t.vocab, {rows, t.seq}, &gen);
    return {ids, ids};
  }
  return with_data(t, cli, false, [&](const auto& set) {
    IPUML_CHECK(set.size() >= rows, "the test set has ", set.size(), " samples, fewer than batch ",
                rows);
    std::vector<int64_t> idx(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) idx[static_cast<size_t>(i)] = i;
    const auto b = set.get_batch(idx);
    return t.prepare(b.data, b.target);
  });
}

int test_app(const Cli& cli) {
  Loaded l = load(cli);
  const double lr = cli.lr.value_or(default_lr(cli.model));
  const Sizing z = size_on_meta(cli.model, l.config, lr, l.setup, l.batch);
  check_graph(cli, l, z.sha);
  if (auto why = too_big_to_execute(z, 1); !why.empty())
    fail(cli.model, " is not tested here: ", why);
  manual_seed(cli.seed);
  Task t = make_task(cli.model, l.config);
  print_loaded(cli, l, t);
  const auto [x, y] = test_batch(t, cli, l.batch);
  const double tolerance = t.bf16 ? 1e-2 : 1e-5;
  // Dropout draws its masks per device: the comparison runs without it.
  if (t.dropout) t.model->eval();
  const bool training = !t.inference;
  std::vector<std::pair<std::string, Tensor>> params;
  for (auto& [name, p] : t.model->named_parameters()) params.emplace_back(name, p);
  auto clear_grads = [&] {
    for (auto& [name, p] : params) p.set_grad(Tensor());
  };
  // On the host CPU, eagerly: logits, loss and (training) every parameter's gradient.
  std::vector<std::pair<std::string, Tensor>> host;
  {
    clear_grads();
    std::optional<NoGradGuard> ng;
    if (!training) ng.emplace();
    const Tensor out = t.forward({x})[0];
    const Tensor loss = t.loss({out}, {y});
    host.emplace_back("logits", out.detach());
    host.emplace_back("loss", loss.detach().reshape({}));
    if (training) {
      loss.backward();
      for (auto& [name, p] : params) host.emplace_back("grad " + name, p.grad().detach().clone());
    }
    clear_grads();
  }
  // On the emulated RDU: the same computation traced into one graph and compiled for the PEF's
  // target, tiles and optimization.
  std::vector<Tensor> rdu;
  {
    ir::Tracer tracer;
    for (auto& [name, p] : params) tracer.name_state(p, name);
    for (auto& [name, b] : t.model->named_buffers()) tracer.name_state(b, name);
    const Tensor xi = tracer.input(x, "input0"), yi = tracer.input(y, "target0");
    std::optional<NoGradGuard> ng;
    if (!training) ng.emplace();
    const Tensor out = t.forward({xi})[0];
    const Tensor loss = t.loss({out}, {yi});
    std::vector<Tensor> outputs{out, loss.reshape({})};
    if (training) {
      loss.backward();
      for (auto& [name, p] : params) outputs.push_back(p.grad());
    }
    ir::Trace tr = tracer.finish(outputs);
    clear_grads();
    const Options o = rdu_options(l.setup, 1);
    auto exe = backend::get_backend("sambanova")->compile(tr.graph, o.backend_options("sambanova"));
    rdu = exe->run({x, y}, tr.states, 0);
  }
  std::cout << "Test: batch " << l.batch << " of "
            << (t.data == Task::Data::Tokens  ? "random tokens"
                : t.data == Task::Data::Masks ? "the generated test masks"
                                              : "the MNIST test set")
            << " on the host CPU (eager) and on the emulated RDU (" << l.setup.describe()
            << "); tolerance " << (t.bf16 ? "1e-2 (bf16)" : "1e-5 (fp32)")
            << " of each tensor's largest magnitude" << (t.dropout ? ", dropout off" : "") << "\n";
  bool ok = true;
  double worst_grad = 0;
  std::string worst_name;
  size_t grads = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    const Discrepancy d = discrepancy(host[i].second, rdu.at(i));
    const bool pass = d.rel <= tolerance;
    ok = ok && pass;
    const bool grad = host[i].first.rfind("grad ", 0) == 0;
    grads += grad ? 1 : 0;
    if (grad && d.rel >= worst_grad) worst_grad = d.rel, worst_name = host[i].first;
    if (grad && host.size() > 14 && pass) continue;  // large models: the failures and the worst
    char line[512];
    std::snprintf(line, sizeof line, "%s %-40s max abs %.3e  max rel %.3e", pass ? "PASS" : "FAIL",
                  (host[i].first + " " + shape_str(host[i].second.shape())).c_str(), d.abs, d.rel);
    std::cout << line << "\n";
  }
  if (grads > 0)
    std::cout << "Gradients: " << grads << " tensors, the largest relative discrepancy "
              << std::scientific << std::setprecision(3) << worst_grad << std::defaultfloat << " ("
              << worst_name << ")\n";
  std::cout << (ok ? "PASS" : "FAIL") << ": " << cli.model << " on the emulated RDU "
            << (ok ? "agrees with" : "differs from") << " the host CPU" << std::endl;
  return ok ? 0 : examples::kExitFailure;
}

// --- measure-performance ------------------------------------------------------------------

int measure_app(const Cli& cli) {
  Loaded l = load(cli);
  const double lr = cli.lr.value_or(default_lr(cli.model));
  const RduSetup& s = l.setup;
  const auto t0 = Clock::now();
  const Sizing z = size_on_meta(cli.model, l.config, lr, s, l.batch);
  const double compile_s = seconds_since(t0);
  check_graph(cli, l, z.sha);
  const Task shown = [&] {
    DefaultDeviceGuard meta(kMeta);
    return make_task(cli.model, l.config);
  }();
  print_loaded(cli, l, shown);
  const Rates r = rates_of(z.estimate, l.batch, s.world_size);
  std::cout << "Simulated on the RDU: latency " << fixed(r.latency_s * 1e3, 3) << " ms per batch, "
            << fixed(r.per_instance, 2) << " samples/s per instance, " << fixed(r.total, 2)
            << " samples/s for " << s.world_size << " instance" << (s.world_size == 1 ? "" : "s")
            << "\n";
  std::cout << "  (the step's sections " << fixed(z.plan.step_cycles / s.target.clock_hz * 1e3, 3)
            << " ms; sized in " << fixed(compile_s, 2) << " s of wall clock here)\n";
  if (auto why = too_big_to_execute(z, s.world_size); !why.empty()) {
    std::cout << "Wall-clock here: not measured: " << why << "\n";
    return 0;
  }
  manual_seed(cli.seed);
  Task t = make_task(cli.model, l.config);
  auto opt = make_optimizer(t, lr);
  Options o = rdu_options(s, s.world_size);
  Generator gen(cli.seed);
  auto [xs, ys] = t.shaped(l.batch * s.world_size);
  // Synthetic inputs of the step's shapes: values do not change the time.
  Tensor x = xs[0].dtype() == kInt64
                 ? randint(0, std::max<int64_t>(1, t.vocab), xs[0].shape(), &gen)
                 : randn(xs[0].shape(), &gen).to(xs[0].dtype());
  Tensor y = ys[0].dtype() == kInt64
                 ? (t.data == Task::Data::Tokens ? x : randint(0, t.classes, ys[0].shape(), &gen))
                 : gt(uniform(ys[0].shape(), 0.0, 1.0, &gen), 0.5).to(ys[0].dtype());
  const int64_t n = cli.iterations > 0 ? cli.iterations : 100;
  std::function<void()> call;
  std::function<std::optional<double>()> simulated;
  std::optional<runtime::TrainingModel> tm;
  std::optional<runtime::InferenceModel> im;
  if (t.inference) {
    im.emplace(t.model, o, t.forward);
    call = [&] { (*im)(Tensors{x}); };
    simulated = [&] { return im->last_stats().simulated_seconds; };
  } else {
    tm.emplace(t.model, o, *opt, t.forward, t.loss);
    call = [&] { (*tm)(Tensors{x}, Tensors{y}); };
    simulated = [&] { return tm->last_stats().simulated_seconds; };
  }
  call();  // compiles
  const auto t1 = Clock::now();
  int64_t done = 0;
  double sim = 0;
  while (done < n) {
    call();
    ++done;
    if (auto v = simulated()) sim += *v;
    if (seconds_since(t1) > 60) break;  // enough to time it
  }
  const double wall = seconds_since(t1);
  const double per_call = wall / double(done);
  std::cout << "Wall-clock here: latency " << fixed(per_call * 1e3, 3) << " ms per batch, "
            << fixed(double(l.batch * s.world_size) / per_call, 2) << " samples/s for "
            << s.world_size << " instance" << (s.world_size == 1 ? "" : "s") << " (" << done
            << " iteration" << (done == 1 ? "" : "s") << " on this host's CPU";
  if (done < n) std::cout << ", stopped after 60 s of the " << n << " asked";
  std::cout << ")\n";
  if (sim > 0)
    std::cout << "Simulated as executed: " << fixed(sim / double(done) * 1e3, 3)
              << " ms per batch\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli;
  CLI::App app{
      "ipuml-sambanova: a SambaFlow app (compile, run, test, measure-performance) on an "
      "emulated SambaNova RDU"};
  app.add_option("model", cli.model, "lenet, ffn_mnist, logreg, unet or gpt2 (lenet.py also)");
  // At most one; none is refused after parsing, so that an unknown option is the error CLI11
  // reports first.
  app.require_subcommand(0, 1);
  CLI::App* compile = app.add_subcommand("compile", "Compile the model's step into a PEF");
  CLI::App* run = app.add_subcommand("run", "Train (or run inference) from a PEF on the RDU");
  CLI::App* test = app.add_subcommand(
      "test", "Run a test batch on the host CPU and on the RDU and compare the outputs");
  CLI::App* measure = app.add_subcommand(
      "measure-performance", "Latency and samples/s of the PEF's step, simulated and here");
  compile->add_option("-b,--batch-size", cli.batch, "Samples per instance (1)")
      ->check(examples::integer_in(1, int64_t{1} << 31));
  compile->add_option("--pef-name", cli.pef_name, "The PEF's name (default: the model's)")
      ->check([](const std::string& s) -> std::string {
        if (s.empty() || s.size() > 64) return "must be 1 to 64 characters";
        for (char c : s)
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
            return "must be letters, digits, '_', '-' or '.', got '" + s + "'";
        return s == "." || s == ".." ? "must name a file" : "";
      });
  compile->add_option("--output-folder", cli.output_folder,
                      "Where DIR/NAME/NAME.pef and the reports go (pef)");
  compile->add_option("--num-tiles", cli.num_tiles, "Tiles of the RDU one instance holds (all)")
      ->check(examples::integer_in(1, 64));
  compile->add_option("-o,--optimization", cli.optimization, "o0 or o1 (-o0, -o1)")
      ->transform([](std::string s) {
        if (s.size() == 1) s.insert(s.begin(), 'o');  // -o0 / -o1
        return s;
      })
      ->check(CLI::IsMember({"o0", "o1"}));
  compile->add_flag("--data-parallel", cli.data_parallel, "Several instances (with -ws N)");
  compile->add_option("--world-size", cli.world_size, "-ws N: data-parallel instances")
      ->check(examples::integer_in(1, 4096));
  compile->add_option("--target", cli.target, "sn30, sn10 or tiny")
      ->check(CLI::IsMember(sambanova::target_preset_names()));
  compile->add_flag("--inference", cli.inference, "Compile the inference step (forward only)");
  add_model_flags(compile, cli);
  const std::vector<CLI::App*> with_pef{run, test, measure};
  for (CLI::App* sub : with_pef) {
    sub->add_option("--pef", cli.pef, "The PEF compile wrote (required)");
    sub->add_option("--seed", cli.seed, "Seed of the weights and the data order (1)");
    sub->add_option("--data-path", cli.data_path,
                    "MNIST's directory (default: ipuml's cache, scripts/fetch-data.sh mnist)");
    sub->add_option("--lr", cli.lr_flag, "Learning rate (the tutorial's default for the model)")
        ->check(examples::number_at_least(0));
  }
  run->add_option("-b,--batch-size", cli.batch, "Checked against the PEF's batch")
      ->check(examples::integer_in(1, int64_t{1} << 31));
  cli.batch_option = run->get_option("--batch-size");
  run->add_option("-e,--num-epochs", cli.epochs, "Epochs (1)")
      ->check(examples::integer_in(1, 1000));
  run->add_option("-n,--num-iterations", cli.iterations, "Steps per epoch at most (all)")
      ->check(examples::integer_at_least(1));
  run->add_option("--log-interval", cli.log_interval, "Steps between log lines (a tenth)")
      ->check(examples::integer_at_least(1));
  run->add_option("--log-path", cli.log_path, "Also write the log lines to DIR/<model>.log");
  run->add_flag("--reduce-on-rdu", cli.reduce_on_rdu,
                "Reduce the instances' gradients on the RDUs (how the emulator reduces them)");
  run->add_flag("--data-parallel", cli.data_parallel, "Accepted: the PEF gives the instances");
  run->add_option("--num-workers", cli.num_workers, "Accepted (batches are assembled here)");
  add_model_flags(run, cli);
  measure->add_option("-n,--num-iterations", cli.iterations, "Iterations timed here (100)")
      ->check(examples::integer_at_least(1));
  const std::vector<std::string> args = normalized_args(argc, argv);
  std::vector<char*> ptrs;
  for (const auto& a : args) ptrs.push_back(const_cast<char*>(a.c_str()));
  if (auto rc = examples::parse_command_line(app, static_cast<int>(ptrs.size()), ptrs.data(), kWho))
    return *rc;
  cli.model = model_name(cli.model);
  if (cli.model.empty())
    return examples::usage_error(kWho, "the model is required: ipuml-sambanova MODEL SUBCOMMAND");
  if (std::find(kModels.begin(), kModels.end(), cli.model) == kModels.end())
    return examples::usage_error(kWho, "unknown model '" + cli.model +
                                           "' (expected lenet, ffn_mnist, logreg, unet or gpt2)");
  if (app.get_subcommands().empty())
    return examples::usage_error(
        kWho, "a subcommand is required: compile, run, test or measure-performance");
  // Only the subcommand given parses its model flags: keep those.
  CLI::App* chosen = app.get_subcommands().front();
  cli.command = chosen->get_name();
  if (auto* o = chosen->get_option_no_throw("--lr"); o && o->count() > 0) cli.lr = cli.lr_flag;
  std::vector<ModelFlag> mine;
  for (auto& f : cli.model_flags)
    if (chosen->get_option_no_throw(f.name.substr(0, f.name.find(','))) == f.option)
      mine.push_back(f);
  cli.model_flags = std::move(mine);
  if (cli.command != "compile" && cli.pef.empty())
    return examples::usage_error(kWho, cli.command + " needs --pef FILE (the PEF compile wrote)");
  if (cli.command == "compile" && cli.world_size > 1 && !cli.data_parallel)
    return examples::usage_error(
        kWho, "-ws " + std::to_string(cli.world_size) + " needs --data-parallel");
  try {
    if (cli.command == "compile") (void)with_given_flags(cli, json::object());
    if (cli.command == "run") (void)with_given_flags(cli, json::object());
  } catch (const std::exception& e) {
    return examples::usage_error(kWho, e.what());
  }
  try {
    if (cli.command == "compile") return compile_app(cli);
    if (cli.command == "run") return run_app(cli);
    if (cli.command == "test") return test_app(cli);
    return measure_app(cli);
  } catch (const std::exception& e) {
    return examples::run_error(kWho, e.what());
  }
}
