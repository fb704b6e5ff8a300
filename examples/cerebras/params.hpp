// The params yaml of a Cerebras-modelzoo run (`run.py CSX --params configs/params.yaml`) as plain
// C++ values, checked key by key so a bad file is refused naming file:line:column and key path.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ipuml::models {
struct GPTJConfig;  // <ipuml/models/gptj.hpp>, for gptj_config()
struct UNetConfig;  // <ipuml/models/unet.hpp>, for unet_config()
}  // namespace ipuml::models

namespace ipuml::cerebras {

// Where a key or value stands in its file, for messages raised long after parsing (a model that
// finds hidden_size not divisible by num_heads names the line the user has to change).
struct Where {
  std::string file;
  int line = 0;  // 1-based; 0 when unknown
  int column = 0;
  // "params.yaml:12:5", or "params.yaml" when the line is unknown.
  std::string str() const;
};

// One checked value of a section; a key given as null is not stored (it means "not set").
struct Value {
  std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>> data;
  Where where;
};

// Every key a section gave, already checked against the section's schema (type, range, allowed
// words), with getters that name the key when it is missing or of another type. The typed
// structs below hold the common keys; model-specific keys (bert's num_heads, unet's
// encoder_filters, ...) are read from here, so adding a model adds a schema, not a struct field.
class Section {
 public:
  Section() = default;
  Section(std::string path, Where where) : path_(std::move(path)), where_(std::move(where)) {}

  const std::string& path() const { return path_; }  // "model", "train_input", ...
  const Where& where() const { return where_; }      // the section's own key
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const Value* find(const std::string& key) const {
    const auto it = values_.find(key);
    return it == values_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> keys() const;
  // Where `key` was given, or the section's place when it was not.
  const Where& where(const std::string& key) const;

  bool get_bool(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;  // an integer value reads as a number too
  const std::string& get_string(const std::string& key) const;
  const std::vector<int64_t>& get_int_list(const std::string& key) const;
  std::vector<double> get_float_list(const std::string& key) const;
  bool get_bool(const std::string& key, bool fallback) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;

  // Throws ipuml::Error "file:line:col: section.key: message" at the key (or the section when
  // the key is absent): for checks a later program makes across keys.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  void set(const std::string& key, Value v) { values_[key] = std::move(v); }

 private:
  const Value& at(const std::string& key, const char* expected) const;

  std::string path_;
  Where where_;
  std::map<std::string, Value> values_;
};

// train_input / eval_input. batch_size is the effective batch, which a run divides over its
// num_csx systems.
struct InputParams {
  std::string data_dir;  // as written: relative paths are for the program to resolve
  int64_t batch_size = 0;
  bool shuffle = true;  // eval_input: false
  bool drop_last_batch = true;
  bool to_float16 = false;
  int64_t num_workers = 0;
  std::optional<int64_t> shuffle_seed;
  // micro_batch_size (weight streaming's micro-batches of the batch one CS-X runs, with gradient
  // accumulation): a fixed size in micro_batch_size (mode "" then), or micro_batch_mode "auto"
  // (the largest that fits), "explore" (every candidate tried, the fastest that fits) or "none"
  // (no split). Neither set: the key was absent (the program's default is auto).
  std::optional<int64_t> micro_batch_size;
  std::string micro_batch_mode;
  Section keys;
};

// model: what every model has; the rest (fc_mnist's depth/hidden_size/hidden_sizes, gptj's
// hidden_size/num_heads/rotary_dim/..., later unet's encoder_filters, ...) is in `keys`, checked
// by the model's schema.
// For fc_mnist, `keys` always holds `hidden_sizes` and `depth` (from either spelling).
struct ModelParams {
  std::string name;
  bool mixed_precision = false;
  double dropout = 0.0;
  std::string activation_fn = "relu";  // lower case
  bool to_float16 = false;             // the weights' type, apart from mixed_precision
  Section keys;
};

struct OptimizerParams {
  std::string optimizer_type;  // "SGD", "Adam" or "AdamW" (spelled so whatever case the file used)
  double learning_rate = 0.0;
  double momentum = 0.0;
  double weight_decay_rate = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // `loss_scaling_factor: dynamic` sets dynamic_loss_scaling; a number sets the static factor.
  bool dynamic_loss_scaling = false;
  double loss_scaling_factor = 1.0;
  std::optional<double> max_gradient_norm;  // absent or 0: no clipping
  Section keys;
};

struct RunConfig {
  // A training run has max_steps or num_epochs (not both: modelzoo's precedence between them
  // is easy to misread, so a file that gives both is refused).
  std::optional<int64_t> max_steps;
  std::optional<int64_t> num_epochs;
  int64_t log_steps = 1;
  int64_t checkpoint_steps = 0;  // 0: only at the end
  std::optional<int64_t> seed;
  bool save_losses = false;
  std::optional<int64_t> eval_steps;
  // run.py's command line may also be written here; the program's flags take precedence.
  std::optional<std::string> model_dir;
  std::optional<std::string> mode;  // train, eval, train_and_eval
  std::optional<int64_t> num_csx;
  bool compile_only = false;
  bool validate_only = false;
  Section keys;
};

struct Params {
  std::string file;         // the name messages use
  std::string description;  // the optional top-level `description:` of older configs
  std::optional<InputParams> train_input;
  std::optional<InputParams> eval_input;
  ModelParams model;
  OptimizerParams optimizer;
  RunConfig runconfig;
  // Keys accepted but not acted on (run.py's cluster flags, loader tuning), one
  // "file:line:col: section.key: ..." line each, for the program to print.
  std::vector<std::string> warnings;
};

// The models whose keys the reader knows (model.name must be one of them).
std::vector<std::string> known_models();

// The GPT-J of a checked `model:` section whose name is gptj (include <ipuml/models/gptj.hpp>
// to call it): hidden_size -> n_embd, num_hidden_layers -> n_layer, num_heads -> n_head,
// max_position_embeddings -> n_positions, filter_size -> n_inner (4 x hidden_size when absent),
// nonlinearity -> activation_function, the three dropout rates -> embd/attn/resid_pdrop,
// share_embedding_weights -> tie_word_embeddings.
models::GPTJConfig gptj_config(const ModelParams& m);
// The UNet of a checked `model:` section whose name is unet (include <ipuml/models/unet.hpp>):
// image_shape [H, W, C] -> height, width, in_channels; encoder_filters' last entry -> the
// bottleneck; num_classes 2 with loss bce -> one logit channel; norm_layer batchnorm2d -> norm.
models::UNetConfig unet_config(const ModelParams& m);

// Reads and checks a params file. Throws ipuml::Error naming the file, the key path, what was
// wrong and what was expected, with line and column where the file gives them.
Params read_params(const std::string& path);
// The same for text already in memory; `name_for_messages` stands for the file in messages.
Params parse_params(const std::string& text, const std::string& name_for_messages);

}  // namespace ipuml::cerebras
