// Reads a modelzoo params yaml with yaml-cpp against a schema per section. yaml-cpp accepts much
// that PyYAML (modelzoo's reader) reads otherwise or not at all, so the text is checked first
// (UTF-8, YAML's printable characters, one document) and each scalar is resolved here, never
// through yaml-cpp's as<T>(), whose conversions differ from PyYAML's and throw their own types.
#include "params.hpp"

#include <ipuml/core/error.hpp>
#include <ipuml/io/file.hpp>
#include <ipuml/models/fc_mnist.hpp>
#include <ipuml/models/gptj.hpp>
#include <ipuml/models/unet.hpp>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string_view>
#include <utility>

namespace ipuml::cerebras {

namespace {

constexpr int64_t kNoCap = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
// Caps on sizes read from the file, so that nothing sized from them later can blow up: a batch
// or layer width of 2^20 is far beyond what the CS-2 examples use, and steps x batch (2^40 x
// 2^20) still counts samples in an int64.
constexpr int64_t kMaxSize = int64_t{1} << 20;
constexpr int64_t kMaxDepth = 4096;
constexpr int64_t kMaxSteps = int64_t{1} << 40;
constexpr size_t kMaxListLength = 4096;
constexpr size_t kMaxStringBytes = 4096;
// A params file is a few kilobytes; the cap keeps a wrong path (a data set, /dev/zero's
// regular-file cousins) from being read into memory and parsed.
constexpr uint64_t kMaxFileBytes = uint64_t{1} << 20;

const char* const kSections[] = {"train_input", "eval_input", "model", "optimizer", "runconfig"};

// ---- how a key may look -------------------------------------------------------------------

// WordList: a list of words each one of `choices` (any case), stored as their indices in
// `choices` (a list of ints), as unet's convs_per_block ["3x3_conv", "3x3_conv"].
// IntOrWord: an integer in [int_min, int_max] or one of `choices` (any case, stored as spelled
// in `choices`), as train_input.micro_batch_size: 64 or auto.
enum class Kind {
  Bool,
  Int,
  Float,
  String,
  IntList,
  FloatList,
  LearningRate,
  NumberOrDynamic,
  WordList,
  IntOrWord
};

struct Spec {
  const char* key;
  Kind kind;
  bool required = false;
  int64_t int_min = std::numeric_limits<int64_t>::min(), int_max = kNoCap;
  double lo = -kInf, hi = kInf;
  bool lo_open = false, hi_open = false;
  std::vector<const char*> choices = {};  // matched in any case; stored as spelled here
  size_t min_len = 0, max_len = kMaxListLength;

  Spec& req() {
    required = true;
    return *this;
  }
};

Spec boolean(const char* key) { return {key, Kind::Bool}; }
Spec integer(const char* key, int64_t min, int64_t max = kNoCap) {
  Spec s{key, Kind::Int};
  s.int_min = min;
  s.int_max = max;
  return s;
}
Spec number(const char* key, double lo, bool lo_open, double hi = kInf, bool hi_open = true,
            Kind kind = Kind::Float) {
  Spec s{key, kind};
  s.lo = lo;
  s.lo_open = lo_open;
  s.hi = hi;
  s.hi_open = hi_open;
  return s;
}
Spec text(const char* key, std::vector<const char*> choices = {}) {
  Spec s{key, Kind::String};
  s.choices = std::move(choices);
  return s;
}
Spec word_list(const char* key, std::vector<const char*> choices, size_t min_len, size_t max_len) {
  Spec s = text(key, std::move(choices));
  s.kind = Kind::WordList;
  s.min_len = min_len;
  s.max_len = max_len;
  return s;
}
Spec int_or_word(const char* key, int64_t min, int64_t max, std::vector<const char*> words) {
  Spec s = integer(key, min, max);
  s.kind = Kind::IntOrWord;
  s.choices = std::move(words);
  return s;
}
Spec int_list(const char* key, int64_t min, int64_t max, size_t min_len, size_t max_len) {
  Spec s = integer(key, min, max);
  s.kind = Kind::IntList;
  s.min_len = min_len;
  s.max_len = max_len;
  return s;
}

// Keys modelzoo writes that change nothing ipuml computes, accepted with a warning. Anything
// else unknown is an error: a misspelt key (`hiden_size`, `learnig_rate`) silently ignored would
// train another model than the one the user wrote.
struct Schema {
  std::vector<Spec> keys;
  std::vector<const char*> ignored = {};
  const char* why_ignored = "";
};

const Schema& input_schema() {
  static const Schema s{
      {text("data_dir").req(), integer("batch_size", 1, kMaxSize).req(), boolean("shuffle"),
       boolean("drop_last_batch"), boolean("to_float16"), integer("num_workers", 0, 1024),
       integer("shuffle_seed", 0),
       // Language models' inputs: tokens per sample, masked tokens per sample (bert's MLM), the
       // vocabulary the data was tokenized with (gptj checks it against the model's), and the
       // data reader and vocabulary file modelzoo names.
       integer("max_sequence_length", 1, kMaxSize), integer("max_predictions_per_seq", 0, kMaxSize),
       integer("vocab_size", 1, kMaxSize), text("data_processor"), text("vocab_file"),
       // Weight streaming's split of the batch one CS-X runs into micro-batches (gradient
       // accumulation): a size dividing batch_size / num_csx (checked by the program, which
       // knows num_csx), or auto, explore or none.
       int_or_word("micro_batch_size", 1, kMaxSize, {"auto", "explore", "none"})},
      // PyTorch DataLoader tuning: how fast batches arrive, not what they hold.
      {"prefetch_factor", "persistent_workers"},
      "data-loader tuning that ipuml's loader does not have; ignored"};
  return s;
}

const Schema& optimizer_schema() {
  static const Schema s{{text("optimizer_type", {"SGD", "Adam", "AdamW"}).req(),
                         number("learning_rate", 0, true, kInf, true, Kind::LearningRate).req(),
                         number("momentum", 0, false, 1, false),
                         number("weight_decay_rate", 0, false), number("beta1", 0, false, 1, true),
                         number("beta2", 0, false, 1, true), number("eps", 0, true),
                         number("loss_scaling_factor", 0, true, kInf, true, Kind::NumberOrDynamic),
                         number("max_gradient_norm", 0, false)},
                        {"log_summaries"},
                        "TensorBoard summaries of the optimizer; ignored"};
  return s;
}

const Schema& runconfig_schema() {
  static const Schema s{
      {integer("max_steps", 1, kMaxSteps), integer("num_epochs", 1, kMaxSize),
       integer("log_steps", 1, kMaxSteps), integer("checkpoint_steps", 0, kMaxSteps),
       integer("seed", 0), boolean("save_losses"), integer("eval_steps", 1, kMaxSteps),
       text("model_dir"), text("mode", {"train", "eval", "train_and_eval"}),
       integer("num_csx", 1, 1024), boolean("compile_only"), boolean("validate_only")},
      // run.py's flags for the Wafer-Scale Cluster's appliance, which the emulator replaces.
      {"compile_dir", "job_labels", "mount_dirs", "python_paths", "num_workers_per_csx",
       "num_wgt_servers", "credentials_path"},
      "a setting of the CS-2 cluster's appliance, which ipuml emulates; ignored"};
  return s;
}

// model: the keys every model has, then each model's own (its schema and a check across keys).
const std::vector<Spec>& model_common_keys() {
  static const std::vector<Spec> k{
      text("name").req(), boolean("mixed_precision"), number("dropout", 0, false, 1, true),
      text("activation_fn", {"relu", "tanh", "gelu", "sigmoid"}), boolean("to_float16")};
  return k;
}

void check_fc_mnist(ModelParams& m);
void check_bert(ModelParams& m);
void check_gptj(ModelParams& m);
void check_unet(ModelParams& m);

struct ModelSchema {
  const char* name;
  std::vector<Spec> keys;
  void (*check)(ModelParams&);
};

// Adding a model: a row here (its keys with their ranges) and its check.
const std::vector<ModelSchema>& model_schemas() {
  static const std::vector<ModelSchema> s{
      {"fc_mnist",
       {integer("depth", 1, kMaxDepth), integer("hidden_size", 1, kMaxSize),
        int_list("hidden_sizes", 1, kMaxSize, 1, kMaxDepth),
        // modelzoo also takes a list of metric names here; only its true/false form is read.
        boolean("compute_eval_metrics")},
       check_fc_mnist},
      // modelzoo's bert (params_bert_large_msl128.yaml spells these keys).
      {"bert",
       {integer("vocab_size", 1, kMaxSize).req(), integer("hidden_size", 1, kMaxSize).req(),
        integer("num_hidden_layers", 1, kMaxDepth).req(), integer("num_heads", 1, kMaxSize).req(),
        integer("filter_size", 1, kMaxSize).req(), integer("max_position_embeddings", 1, kMaxSize),
        text("encoder_nonlinearity", {"gelu", "relu"}), number("dropout_rate", 0, false, 1, true),
        number("attention_dropout_rate", 0, false, 1, true), number("layer_norm_epsilon", 0, true),
        integer("num_segments", 1, 1024),
        // What ipuml's BertForPreTraining is and cannot be otherwise: refused when set to the
        // other value, so that a file never trains a model it did not describe.
        boolean("disable_nsp"), boolean("share_embedding_weights"),
        text("position_embedding_type", {"learned"})},
       check_bert},
      // modelzoo's gptj (GPT-J-6B's params_gptj_6B.yaml names); ipuml's models::GPTJ.
      {"gptj",
       {integer("vocab_size", 1, kMaxSize).req(), integer("hidden_size", 1, kMaxSize).req(),
        integer("num_hidden_layers", 1, kMaxDepth).req(), integer("num_heads", 1, kMaxSize).req(),
        integer("rotary_dim", 1, kMaxSize).req(), integer("filter_size", 1, kMaxSize),
        integer("max_position_embeddings", 1, kMaxSize).req(),
        number("layer_norm_epsilon", 0, true, 1, true),
        number("embedding_dropout_rate", 0, false, 1, true),
        number("attention_dropout_rate", 0, false, 1, true),
        number("residual_dropout_rate", 0, false, 1, true), boolean("use_bias_in_output"),
        boolean("share_embedding_weights"), text("position_embedding_type", {"rotary"}),
        text("nonlinearity", {"gelu_new", "gelu"}), number("initializer_range", 0, false, 1, true)},
       check_gptj},
      // modelzoo's vision/pytorch/unet: image_shape and num_classes as its train_input gives them
      // (its run copies them into the model's params); encoder_filters ends with the bottleneck.
      {"unet",
       {int_list("image_shape", 1, kMaxSize, 3, 3).req(), integer("input_channels", 1, 4096),
        integer("num_classes", 2, 4096).req(),
        int_list("encoder_filters", 1, kMaxSize, 2, 13).req(),
        int_list("decoder_filters", 1, kMaxSize, 1, 12).req(),
        word_list("convs_per_block", {"3x3_conv", "3x3_dw_conv", "1x1_conv"}, 1, 16),
        boolean("skip_connect"), text("downscale_method", {"max_pool", "strided_conv"}),
        boolean("residual_blocks"), boolean("enable_bias"), text("nonlinearity"),
        text("norm_layer"), text("initializer"), text("bias_initializer"),
        text("loss", {"bce", "ssce", "multilabel_bce", "ssce_dice"}), boolean("use_conv3d"),
        number("dropout_rate", 0, false, 1, true), boolean("use_bfloat16")},
       check_unet},
  };
  return s;
}

// ---- text and messages --------------------------------------------------------------------

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A value from the file, quoted, control characters escaped and cut at 40 bytes (whole UTF-8
// characters), so a message stays one readable line whatever the file holds.
std::string shown(const std::string& s) {
  std::string out = "'";
  size_t i = 0;
  for (; i < s.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) out += s[i++];
  out += i < s.size() ? "...'" : "'";
  return out;
}

// A key from the file in a key path: as shown() but without the quotes.
std::string bare(const std::string& s) {
  const std::string q = shown(s);
  return q.substr(1, q.size() - 2);
}

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*x", digits, static_cast<unsigned>(v));
  return buf;
}

// The length of the UTF-8 character at s[i] and its code point, or 0 when the bytes there are
// not UTF-8 (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, a
// code point past U+10FFFF).
size_t utf8_char(std::string_view s, size_t i, uint32_t* cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t v = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    v = (v << 6) | (cc & 0x3f);
  }
  if ((len == 2 && v < 0x80) || (len == 3 && v < 0x800) || (len == 4 && v < 0x10000) ||
      v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
    return 0;
  *cp = v;
  return len;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'hidden_size'?)" for a key one or two edits from a known one.
std::string did_you_mean(const std::string& key, const std::vector<std::string>& known) {
  if (key.size() > 64) return "";
  std::string best;
  size_t best_d = 3;
  for (const auto& k : known) {
    const size_t d = edit_distance(lower(key), k);
    if (d < best_d && d < std::max<size_t>(k.size() / 2, 1)) {
      best_d = d;
      best = k;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string expected(const Spec& s) {
  auto num = [](double v) { return detail::str(v); };
  switch (s.kind) {
    case Kind::Bool:
      return "true or false";
    case Kind::String:
      if (s.choices.empty()) return "a string";
      return "one of " + join(std::vector<std::string>(s.choices.begin(), s.choices.end())) +
             (lower(s.choices[0]) != s.choices[0] ? " (any case)" : "");
    case Kind::Int:
    case Kind::IntList:
    case Kind::IntOrWord: {
      std::string r;
      if (s.int_max != kNoCap)
        r = "an integer in [" + std::to_string(s.int_min) + ", " + std::to_string(s.int_max) + "]";
      else if (s.int_min == 1)
        r = "an integer > 0";
      else
        r = "an integer >= " + std::to_string(s.int_min);
      if (s.kind == Kind::IntOrWord)
        return r + " or one of " +
               join(std::vector<std::string>(s.choices.begin(), s.choices.end()));
      return s.kind == Kind::IntList ? "a list of " + std::to_string(s.min_len) + " to " +
                                           std::to_string(s.max_len) + " entries, each " + r
                                     : r;
    }
    default: {
      std::string r;
      if (s.hi != kInf)
        r = "a number in " + std::string(s.lo_open ? "(" : "[") + num(s.lo) + ", " + num(s.hi) +
            (s.hi_open ? ")" : "]");
      else
        r = "a number " + std::string(s.lo_open ? "> " : ">= ") + num(s.lo);
      if (s.kind == Kind::NumberOrDynamic) r += " or 'dynamic'";
      if (s.kind == Kind::FloatList) r = "a list of numbers, each " + r;
      if (s.kind == Kind::WordList)
        r = "a list of " + std::to_string(s.min_len) + " to " + std::to_string(s.max_len) +
            " entries, each one of " +
            join(std::vector<std::string>(s.choices.begin(), s.choices.end()));
      return r;
    }
  }
}

// ---- the reader ---------------------------------------------------------------------------

struct Reader {
  std::string file;
  std::vector<std::string>* warnings;

  Where at(const YAML::Mark& m) const {
    Where w{file, 0, 0};
    if (m.line >= 0 && m.column >= 0) {
      w.line = m.line + 1;
      w.column = m.column + 1;
    }
    return w;
  }
  [[noreturn]] void fail(const Where& w, const std::string& path, const std::string& msg) const {
    ipuml::fail(w.str(), ": ", path.empty() ? "" : path + ": ", msg);
  }
  [[noreturn]] void fail(const YAML::Mark& m, const std::string& path,
                         const std::string& msg) const {
    fail(at(m), path, msg);
  }
};

bool is_null(const YAML::Node& n) {
  if (n.IsNull()) return true;
  if (!n.IsScalar() || n.Tag() != "?") return false;
  const std::string& s = n.Scalar();
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// How a node reads in "got ...".
std::string describe(const YAML::Node& n) {
  if (is_null(n)) return "null";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (n.IsScalar()) {
    if (n.Tag() == "!") return "the quoted string " + shown(n.Scalar());
    return shown(n.Scalar());
  }
  return "nothing";
}

// Plain scalars resolve close to PyYAML's YAML 1.1 resolver (yes/no/on/off are booleans, 010 is
// refused as octal), except that 1e-3 reads as a number (PyYAML leaves it a string, a common
// surprise); a quoted scalar is always a string; !!int, !!float, !!bool and !!str are read as
// their plain or quoted form; any other tag is refused.
enum class Style { Plain, Quoted };

Style scalar_style(const Reader& r, const YAML::Node& n, const std::string& path) {
  const std::string& tag = n.Tag();
  if (tag == "?" || tag == "tag:yaml.org,2002:int" || tag == "tag:yaml.org,2002:float" ||
      tag == "tag:yaml.org,2002:bool")
    return Style::Plain;
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return Style::Quoted;
  r.fail(n.Mark(), path, "the tag " + shown(tag) + " is not supported; expected a plain value");
}

std::optional<bool> as_bool(const std::string& s) {
  static const char* const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const char* const no[] = {"false", "False", "FALSE", "no", "No",
                                   "NO",    "off",   "Off",   "OFF"};
  for (const char* y : yes)
    if (s == y) return true;
  for (const char* n : no)
    if (s == n) return false;
  return std::nullopt;
}

bool special_float(const std::string& s) {
  const std::string l = lower(s);
  const std::string_view v = l[0] == '+' || l[0] == '-' ? std::string_view(l).substr(1) : l;
  return v == ".inf" || v == ".nan" || v == "inf" || v == "nan" || v == "infinity";
}

// Parses a decimal number ("1e-3", ".5", "2", "-0.25"); nullopt for anything else. NaN and
// infinities come back as themselves so that the caller can name them.
std::optional<double> as_double(const std::string& s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  if (special_float(s)) {
    const bool neg = s[0] == '-';
    if (lower(s).find("nan") != std::string::npos) return std::numeric_limits<double>::quiet_NaN();
    return neg ? -kInf : kInf;
  }
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;
  for (const char* p = b; p < e; ++p)
    if (!(std::isdigit(static_cast<unsigned char>(*p)) || *p == '.' || *p == 'e' || *p == 'E' ||
          *p == '-' || *p == '+'))
      return std::nullopt;  // from_chars would also take "inf", "nan" and hex digits
  double v = 0;
  const auto res = std::from_chars(b, e, v, std::chars_format::general);
  if (res.ec == std::errc::result_out_of_range) return std::nullopt;
  if (res.ec != std::errc() || res.ptr != e) return std::nullopt;
  return v;
}

struct IntParse {
  enum { Ok, NotInt, Octal, TooBig } status;
  int64_t value = 0;
};

IntParse as_int(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return {IntParse::NotInt};
  for (size_t j = i; j < s.size(); ++j)
    if (!std::isdigit(static_cast<unsigned char>(s[j]))) return {IntParse::NotInt};
  // YAML 1.1 (PyYAML) reads 010 as octal 8: refused rather than read as another number.
  if (s.size() - i > 1 && s[i] == '0') return {IntParse::Octal};
  int64_t v = 0;
  const char* b = s.data() + (s[0] == '+' ? 1 : 0);
  const auto res = std::from_chars(b, s.data() + s.size(), v);
  if (res.ec != std::errc() || res.ptr != s.data() + s.size()) return {IntParse::TooBig};
  return {IntParse::Ok, v};
}

// Checks a string value: no control characters (an escaped "\0" in a quoted string), valid
// UTF-8 (an escaped lone surrogate), bounded length.
void check_string(const Reader& r, const YAML::Node& n, const std::string& path,
                  const std::string& s) {
  if (s.empty()) r.fail(n.Mark(), path, "expected a non-empty string, got ''");
  if (s.size() > kMaxStringBytes)
    r.fail(n.Mark(), path,
           "a string of " + std::to_string(s.size()) + " bytes, expected at most " +
               std::to_string(kMaxStringBytes));
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f)
      r.fail(n.Mark(), path, "expected a string without control characters, got " + shown(s));
    uint32_t cp = 0;
    const size_t len = utf8_char(s, i, &cp);
    if (len == 0) r.fail(n.Mark(), path, "expected a string of UTF-8 characters, got " + shown(s));
    i += len;
  }
}

bool in_range(const Spec& s, double v) {
  return (s.lo_open ? v > s.lo : v >= s.lo) && (s.hi_open ? v < s.hi : v <= s.hi);
}

// One scalar as an integer of the spec's range.
int64_t read_int(const Reader& r, const YAML::Node& n, const std::string& path, const Spec& s) {
  const std::string want = "expected " + expected(s);
  if (!n.IsScalar() || is_null(n)) r.fail(n.Mark(), path, want + ", got " + describe(n));
  if (scalar_style(r, n, path) == Style::Quoted)
    r.fail(n.Mark(), path, want + ", got " + describe(n));
  const IntParse p = as_int(n.Scalar());
  if (p.status == IntParse::Octal)
    r.fail(n.Mark(), path,
           want + ", got " + shown(n.Scalar()) +
               " (a leading 0 makes it octal in YAML 1.1; write it without)");
  if (p.status == IntParse::TooBig)
    r.fail(n.Mark(), path, want + ", got " + shown(n.Scalar()) + ", which is out of range");
  if (p.status == IntParse::NotInt) r.fail(n.Mark(), path, want + ", got " + describe(n));
  if (p.value < s.int_min || p.value > s.int_max)
    r.fail(n.Mark(), path,
           want + ", got " + shown(n.Scalar()) +
               (p.value > s.int_max && s.int_max != kNoCap
                    ? " (a cap that keeps what is sized from it allocatable)"
                    : ""));
  return p.value;
}

double read_float(const Reader& r, const YAML::Node& n, const std::string& path, const Spec& s) {
  const std::string want = "expected " + expected(s);
  if (!n.IsScalar() || is_null(n) || scalar_style(r, n, path) == Style::Quoted)
    r.fail(n.Mark(), path, want + ", got " + describe(n));
  const std::optional<double> v = as_double(n.Scalar());
  if (!v) r.fail(n.Mark(), path, want + ", got " + describe(n));
  if (!std::isfinite(*v)) r.fail(n.Mark(), path, want + " (finite), got " + shown(n.Scalar()));
  if (!in_range(s, *v)) r.fail(n.Mark(), path, want + ", got " + shown(n.Scalar()));
  return *v;
}

// Reads one key's value by its spec into `out`; null values are left out (not set).
void read_value(const Reader& r, const YAML::Node& n, const std::string& path, const Spec& s,
                Section& out) {
  if (is_null(n)) return;
  Value v;
  v.where = r.at(n.Mark());
  const std::string want = "expected " + expected(s);
  switch (s.kind) {
    case Kind::Bool: {
      if (!n.IsScalar()) r.fail(n.Mark(), path, want + ", got " + describe(n));
      const std::optional<bool> b =
          scalar_style(r, n, path) == Style::Plain ? as_bool(n.Scalar()) : std::nullopt;
      if (!b) r.fail(n.Mark(), path, want + ", got " + describe(n));
      v.data = *b;
      break;
    }
    case Kind::Int:
      v.data = read_int(r, n, path, s);
      break;
    case Kind::Float:
      v.data = read_float(r, n, path, s);
      break;
    case Kind::LearningRate:
      if (n.IsSequence() || n.IsMap())
        r.fail(n.Mark(), path,
               "learning-rate schedules (a list or mapping) are not supported yet; " + want +
                   ", got " + describe(n));
      v.data = read_float(r, n, path, s);
      break;
    case Kind::NumberOrDynamic:
      if (n.IsScalar() && lower(n.Scalar()) == "dynamic") {
        v.data = std::string("dynamic");
        break;
      }
      v.data = read_float(r, n, path, s);
      break;
    case Kind::IntOrWord: {
      if (n.IsScalar()) {
        const std::string& word = n.Scalar();
        const auto it = std::find_if(s.choices.begin(), s.choices.end(),
                                     [&](const char* c) { return lower(c) == lower(word); });
        if (it != s.choices.end()) {
          scalar_style(r, n, path);  // refuses an unsupported tag
          v.data = std::string(*it);
          break;
        }
      }
      v.data = read_int(r, n, path, s);  // names the words too when the value is neither
      break;
    }
    case Kind::String: {
      if (!n.IsScalar()) r.fail(n.Mark(), path, want + ", got " + describe(n));
      scalar_style(r, n, path);
      std::string str = n.Scalar();
      check_string(r, n, path, str);
      if (!s.choices.empty()) {
        const auto it = std::find_if(s.choices.begin(), s.choices.end(),
                                     [&](const char* c) { return lower(c) == lower(str); });
        if (it == s.choices.end()) r.fail(n.Mark(), path, want + ", got " + describe(n));
        str = *it;
      }
      v.data = std::move(str);
      break;
    }
    case Kind::WordList: {
      if (!n.IsSequence()) r.fail(n.Mark(), path, want + ", got " + describe(n));
      if (n.size() < s.min_len || n.size() > s.max_len)
        r.fail(n.Mark(), path, want + ", got " + std::to_string(n.size()) + " entries");
      std::vector<int64_t> picks;
      for (const YAML::Node& e : n) {
        const std::string at = path + "[" + std::to_string(picks.size()) + "]";
        if (!e.IsScalar() || is_null(e)) r.fail(e.Mark(), at, want + ", got " + describe(e));
        scalar_style(r, e, at);
        const std::string word = e.Scalar();
        check_string(r, e, at, word);
        const auto it = std::find_if(s.choices.begin(), s.choices.end(),
                                     [&](const char* c) { return lower(c) == lower(word); });
        if (it == s.choices.end())
          r.fail(e.Mark(), at,
                 "expected one of " +
                     join(std::vector<std::string>(s.choices.begin(), s.choices.end())) + ", got " +
                     describe(e));
        picks.push_back(it - s.choices.begin());
      }
      v.data = std::move(picks);
      break;
    }
    case Kind::IntList:
    case Kind::FloatList: {
      if (!n.IsSequence()) r.fail(n.Mark(), path, want + ", got " + describe(n));
      if (n.size() < s.min_len || n.size() > s.max_len)
        r.fail(n.Mark(), path, want + ", got " + std::to_string(n.size()) + " entries");
      std::vector<int64_t> ints;
      std::vector<double> floats;
      size_t i = 0;
      for (const YAML::Node& e : n) {
        const std::string at = path + "[" + std::to_string(i++) + "]";
        if (s.kind == Kind::IntList)
          ints.push_back(read_int(r, e, at, s));
        else
          floats.push_back(read_float(r, e, at, s));
      }
      if (s.kind == Kind::IntList)
        v.data = std::move(ints);
      else
        v.data = std::move(floats);
      break;
    }
  }
  out.set(s.key, std::move(v));
}

// The keys of a mapping in file order, each checked to be a plain name given once.
std::vector<std::pair<std::string, std::pair<YAML::Node, YAML::Node>>> entries(
    const Reader& r, const YAML::Node& map, const std::string& path) {
  std::vector<std::pair<std::string, std::pair<YAML::Node, YAML::Node>>> out;
  std::map<std::string, int> first_line;
  for (auto it = map.begin(); it != map.end(); ++it) {
    // Copies: the iterator's operator-> returns a proxy that dies with the statement.
    const YAML::Node k = it->first, v = it->second;
    const std::string prefix = path.empty() ? "" : path + ".";
    if (!k.IsScalar() || is_null(k))
      r.fail(k.Mark(), path, "expected a key name, got " + describe(k) + " as a key");
    std::string name = k.Scalar();
    check_string(r, k, prefix + bare(name), name);
    const auto [seen, fresh] = first_line.emplace(name, r.at(k.Mark()).line);
    // yaml-cpp keeps both entries of a repeated key (and node["key"] finds the first), PyYAML
    // keeps the last: either way one of the user's two values would be dropped unseen.
    if (!fresh)
      r.fail(k.Mark(), prefix + name,
             "duplicate key (first given at line " + std::to_string(seen->second) +
                 "); give each key once");
    out.emplace_back(std::move(name), std::make_pair(k, v));
  }
  return out;
}

// A section: a mapping (or null: empty) read against `specs`; unknown keys in `schema.ignored`
// give a warning, others an error listing the known keys.
Section read_section(const Reader& r, const YAML::Node& key, const YAML::Node& node,
                     const std::string& path, const std::vector<Spec>& specs, const Schema* schema,
                     const std::string& unknown_context = "") {
  Section out(path, r.at(key.Mark()));
  std::vector<std::string> known;
  for (const Spec& s : specs) known.push_back(s.key);
  if (!is_null(node) && !node.IsMap())
    r.fail(node.Mark(), path,
           "expected a mapping of keys (" + join(known) + "), got " + describe(node));
  if (!is_null(node)) {
    for (const auto& entry : entries(r, node, path)) {
      // Not a structured binding: Clang 14 (the sanitizer tree) cannot capture one in a lambda.
      const std::string& name = entry.first;
      const auto& kv = entry.second;
      const auto spec =
          std::find_if(specs.begin(), specs.end(), [&](const Spec& s) { return name == s.key; });
      if (spec != specs.end()) {
        read_value(r, kv.second, path + "." + name, *spec, out);
        continue;
      }
      if (schema && std::any_of(schema->ignored.begin(), schema->ignored.end(),
                                [&](const char* k) { return name == k; })) {
        r.warnings->push_back(r.at(kv.first.Mark()).str() + ": " + path + "." + name + ": " +
                              schema->why_ignored);
        continue;
      }
      r.fail(kv.first.Mark(), path + "." + bare(name),
             "unknown key" + unknown_context + did_you_mean(name, known) +
                 "; known keys: " + join(known));
    }
  }
  for (const Spec& s : specs)
    if (s.required && !out.has(s.key))
      out.fail(s.key, "missing (required); expected " + expected(s));
  return out;
}

InputParams read_input(const Reader& r, const YAML::Node& key, const YAML::Node& node,
                       const std::string& path) {
  InputParams in;
  in.keys = read_section(r, key, node, path, input_schema().keys, &input_schema());
  const Section& k = in.keys;
  in.data_dir = k.get_string("data_dir");
  in.batch_size = k.get_int("batch_size");
  in.shuffle = k.get_bool("shuffle", path == "train_input");
  in.drop_last_batch = k.get_bool("drop_last_batch", true);
  in.to_float16 = k.get_bool("to_float16", false);
  in.num_workers = k.get_int("num_workers", 0);
  if (k.has("shuffle_seed")) in.shuffle_seed = k.get_int("shuffle_seed");
  if (const Value* v = k.find("micro_batch_size")) {
    if (const auto* word = std::get_if<std::string>(&v->data))
      in.micro_batch_mode = *word;
    else
      in.micro_batch_size = std::get<int64_t>(v->data);
  }
  return in;
}

ModelParams read_model(const Reader& r, const YAML::Node& key, const YAML::Node& node) {
  // The name picks the schema of the other keys, so it is read first.
  std::vector<std::string> names = known_models();
  std::vector<const char*> choices;
  for (const auto& s : model_schemas()) choices.push_back(s.name);
  std::vector<Spec> specs = model_common_keys();
  specs[0].choices = choices;
  const ModelSchema* schema = nullptr;
  if (node.IsMap()) {
    for (const auto& [name, kv] : entries(r, node, "model")) {
      if (name != "name") continue;
      Section probe("model", r.at(key.Mark()));
      read_value(r, kv.second, "model.name", specs[0], probe);
      if (!probe.has("name"))
        r.fail(kv.second.Mark(), "model.name", "expected one of " + join(names) + ", got null");
      for (const auto& s : model_schemas())
        if (probe.get_string("name") == s.name) schema = &s;
    }
  }
  // Without a name, the other keys could only be called unknown: say what is missing instead.
  if (!schema && node.IsMap())
    r.fail(r.at(key.Mark()), "model.name",
           "missing (required); expected one of " + join(names) + " before the model's keys");
  if (schema) specs.insert(specs.end(), schema->keys.begin(), schema->keys.end());
  ModelParams m;
  m.keys = read_section(r, key, node, "model", specs, nullptr,
                        schema ? " for model '" + std::string(schema->name) + "'" : "");
  m.name = m.keys.get_string("name");
  m.mixed_precision = m.keys.get_bool("mixed_precision", false);
  m.dropout = m.keys.get_float("dropout", 0.0);
  m.activation_fn = m.keys.get_string("activation_fn", "relu");
  m.to_float16 = m.keys.get_bool("to_float16", false);
  if (schema) schema->check(m);
  return m;
}

// fc_mnist: `depth` x `hidden_size`, or `hidden_sizes`; afterwards `keys` holds both depth and
// hidden_sizes, and the network the config describes is known to be buildable.
void check_bert(ModelParams& m) {
  Section& k = m.keys;
  if (k.get_bool("disable_nsp", false))
    k.fail("disable_nsp",
           "true is not supported: ipuml's BertForPreTraining always has the NSP "
           "head (give false or leave the key out)");
  if (!k.get_bool("share_embedding_weights", true))
    k.fail("share_embedding_weights",
           "false is not supported: the MLM decoder shares the word embeddings (give true)");
  if (k.get_int("hidden_size") % k.get_int("num_heads") != 0)
    k.fail("num_heads", "hidden_size " + std::to_string(k.get_int("hidden_size")) +
                            " must divide by num_heads " + std::to_string(k.get_int("num_heads")));
}

void check_fc_mnist(ModelParams& m) {
  Section& k = m.keys;
  const bool list = k.has("hidden_sizes"), depth = k.has("depth"), width = k.has("hidden_size");
  // modelzoo lets hidden_sizes win silently; a file giving both says two things, one unread.
  if (list && (depth || width))
    k.fail("hidden_sizes", std::string("give depth and hidden_size, or hidden_sizes, not both (") +
                               (depth ? "depth" : "hidden_size") +
                               " is also given; modelzoo would ignore it)");
  if (!list && !depth)
    k.fail("depth", width ? "missing; fc_mnist's hidden_size needs depth (or give hidden_sizes)"
                          : "missing; fc_mnist needs depth and hidden_size, or hidden_sizes");
  if (!list && !width) k.fail("hidden_size", "missing; fc_mnist's depth needs hidden_size");
  std::vector<int64_t> sizes;
  std::string from = "hidden_sizes";
  if (list) {
    sizes = k.get_int_list("hidden_sizes");
    k.set("depth", Value{static_cast<int64_t>(sizes.size()), k.where("hidden_sizes")});
  } else {
    from = "hidden_size";
    sizes.assign(static_cast<size_t>(k.get_int("depth")), k.get_int("hidden_size"));
    k.set("hidden_sizes", Value{sizes, k.where("hidden_size")});
  }
  try {
    models::FcMnistConfig()
        .hidden_sizes(sizes)
        .dropout(m.dropout)
        .activation_fn(m.activation_fn)
        .validate();
  } catch (const Error& e) {
    k.fail(from, e.what());
  }
}

// gptj: the sizes make a GPT-J (heads divide hidden_size, rotary_dim fits a head) that ipuml
// builds (lm_head with its bias); gptj's dropouts and activation have their own keys.
void check_gptj(ModelParams& m) {
  const Section& k = m.keys;
  for (const char* common : {"dropout", "activation_fn"})
    if (k.has(common))
      k.fail(common, std::string("not read for gptj; its keys are ") +
                         (std::string(common) == "dropout"
                              ? "embedding_dropout_rate, attention_dropout_rate and "
                                "residual_dropout_rate"
                              : "nonlinearity"));
  const int64_t hidden = k.get_int("hidden_size"), heads = k.get_int("num_heads");
  if (hidden % heads != 0)
    k.fail("num_heads", "hidden_size=" + std::to_string(hidden) +
                            " is not divisible by num_heads=" + std::to_string(heads));
  const int64_t head = hidden / heads, rotary = k.get_int("rotary_dim");
  if (rotary % 2 != 0 || rotary > head)
    k.fail("rotary_dim", "must be even and at most the head size hidden_size / num_heads = " +
                             std::to_string(head) + ", got " + std::to_string(rotary));
  if (!k.get_bool("use_bias_in_output", true))
    k.fail("use_bias_in_output",
           "false is not supported: GPT-J's lm_head has a bias, and ipuml's GPT-J builds it");
  models::GPTJConfig c;
  try {
    c = gptj_config(m);
    c.validate();
  } catch (const Error& e) {
    k.fail("hidden_size", e.what());
  }
  // The sizes are capped one by one; the product is capped so that what is counted from it
  // (bytes of weights, gradients and optimizer state) stays an int64.
  constexpr int64_t kMaxGptjParameters = int64_t{1} << 40;
  if (c.num_parameters() > kMaxGptjParameters)
    k.fail("hidden_size", "these sizes make " + std::to_string(c.num_parameters()) +
                              " parameters, expected at most 2^40");
}

// unet: modelzoo's keys mapped onto models::UNetConfig, what ipuml's UNet does not build refused
// at the key that asks for it; afterwards `keys` holds input_channels (from image_shape when not
// given), and the network the config describes is known to be buildable.
void check_unet(ModelParams& m) {
  Section& k = m.keys;
  auto refuse_if = [&](bool bad, const char* key, const std::string& why) {
    if (bad) k.fail(key, why);
  };
  refuse_if(!k.get_bool("skip_connect", true), "skip_connect",
            "false is not supported: ipuml's UNet always concatenates the encoder's outputs");
  refuse_if(k.get_bool("residual_blocks", false), "residual_blocks",
            "true is not supported: ipuml's UNet blocks have no residual connection");
  refuse_if(k.get_bool("use_conv3d", false), "use_conv3d",
            "true is not supported: ipuml's UNet is 2-D");
  refuse_if(k.get_bool("use_bfloat16", false), "use_bfloat16",
            "true is not supported for unet (bfloat16 is not emulated); use mixed_precision");
  refuse_if(k.get_float("dropout_rate", 0.0) != 0.0, "dropout_rate",
            "only 0 is supported: ipuml's UNet has no dropout layers");
  refuse_if(k.get_string("downscale_method", "max_pool") != "max_pool", "downscale_method",
            "'strided_conv' is not supported: ipuml's UNet downscales with 2x2 max-pools");
  refuse_if(
      lower(k.get_string("nonlinearity", "relu")) != "relu", "nonlinearity",
      "'" + k.get_string("nonlinearity", "") + "' is not supported: ipuml's UNet builds ReLU only");
  refuse_if(k.has("norm_layer") && lower(k.get_string("norm_layer")) != "batchnorm2d", "norm_layer",
            "'" + k.get_string("norm_layer", "") +
                "' is not supported; expected batchnorm2d (or null for none)");
  refuse_if(k.has("bias_initializer") && k.get_string("bias_initializer") != "zeros",
            "bias_initializer", "only 'zeros' is supported");
  // modelzoo's create_initializer also takes a mapping ({name: ..., gain: ...}); the name alone
  // is read here (a mapping is refused as not a string).
  std::string init = "pytorch";
  if (k.has("initializer")) {
    init = k.get_string("initializer");
    refuse_if(!models::UNetConfig::known_initializer(init) || init == "pytorch", "initializer",
              "'" + init +
                  "' is not supported; expected glorot_uniform, glorot_normal, kaiming_uniform "
                  "or kaiming_normal");
  }
  if (k.has("convs_per_block")) {
    const auto& picks = k.get_int_list("convs_per_block");
    for (size_t i = 0; i < picks.size(); ++i)
      refuse_if(picks[i] != 0, "convs_per_block",
                std::string("entry ") + std::to_string(i) + " is " +
                    (picks[i] == 1 ? "3x3_dw_conv" : "1x1_conv") +
                    ": ipuml's UNet builds 3x3_conv only");
  }
  const std::string loss = k.get_string("loss", k.get_int("num_classes") <= 2 ? "bce" : "ssce");
  refuse_if(loss != "bce" && loss != "ssce", "loss",
            "'" + loss + "' is not supported; expected bce (binary) or ssce");
  const int64_t classes = k.get_int("num_classes");
  refuse_if(loss == "bce" && classes != 2, "num_classes",
            "loss bce needs num_classes: 2 (one logit channel), got " + std::to_string(classes));

  const auto& shape = k.get_int_list("image_shape");  // [H, W, C]
  if (!k.has("input_channels")) k.set("input_channels", Value{shape[2], k.where("image_shape")});
  refuse_if(k.get_int("input_channels") != shape[2], "input_channels",
            std::to_string(k.get_int("input_channels")) + " differs from image_shape's " +
                std::to_string(shape[2]) + " channels");
  const auto& enc = k.get_int_list("encoder_filters");
  const auto& dec = k.get_int_list("decoder_filters");
  refuse_if(dec.size() + 1 != enc.size(), "decoder_filters",
            "expected " + std::to_string(enc.size() - 1) +
                " entries (one fewer than encoder_filters, whose last is the bottleneck), got " +
                std::to_string(dec.size()));
  models::UNetConfig c = unet_config(m);
  try {
    c.validate();
  } catch (const Error& e) {
    // At the key the failed check is about (the parameter count: encoder_filters).
    const std::string msg = e.what();
    auto about = [&](const char* word) { return msg.find(word) != std::string::npos; };
    k.fail(about("image of") || about("in_channels") ? "image_shape"
           : about("num_classes")                    ? "num_classes"
           : about("decoder_filters")                ? "decoder_filters"
                                                     : "encoder_filters",
           msg);
  }
}

OptimizerParams read_optimizer(const Reader& r, const YAML::Node& key, const YAML::Node& node) {
  OptimizerParams o;
  o.keys = read_section(r, key, node, "optimizer", optimizer_schema().keys, &optimizer_schema());
  const Section& k = o.keys;
  o.optimizer_type = k.get_string("optimizer_type");
  o.learning_rate = k.get_float("learning_rate");
  o.momentum = k.get_float("momentum", 0.0);
  o.weight_decay_rate = k.get_float("weight_decay_rate", 0.0);
  o.beta1 = k.get_float("beta1", 0.9);
  o.beta2 = k.get_float("beta2", 0.999);
  o.eps = k.get_float("eps", 1e-8);
  if (const Value* v = k.find("loss_scaling_factor")) {
    if (std::holds_alternative<std::string>(v->data))  // the schema allows only "dynamic"
      o.dynamic_loss_scaling = true;
    else
      o.loss_scaling_factor = k.get_float("loss_scaling_factor");
  }
  if (k.has("max_gradient_norm")) o.max_gradient_norm = k.get_float("max_gradient_norm");
  // Keys of the other optimizers: harmless, but the user may think they act.
  const bool sgd = o.optimizer_type == "SGD";
  for (const char* name : {"momentum", "beta1", "beta2", "eps"}) {
    const bool applies = std::string(name) == "momentum" ? sgd : !sgd;
    if (k.has(name) && !applies)
      r.warnings->push_back(k.where(name).str() + ": optimizer." + name + ": not used by " +
                            o.optimizer_type + "; ignored");
  }
  return o;
}

RunConfig read_runconfig(const Reader& r, const YAML::Node& key, const YAML::Node& node) {
  RunConfig c;
  c.keys = read_section(r, key, node, "runconfig", runconfig_schema().keys, &runconfig_schema());
  const Section& k = c.keys;
  auto opt_int = [&](const char* name) {
    return k.has(name) ? std::optional<int64_t>(k.get_int(name)) : std::nullopt;
  };
  c.max_steps = opt_int("max_steps");
  c.num_epochs = opt_int("num_epochs");
  c.log_steps = k.get_int("log_steps", 1);
  c.checkpoint_steps = k.get_int("checkpoint_steps", 0);
  c.seed = opt_int("seed");
  c.save_losses = k.get_bool("save_losses", false);
  c.eval_steps = opt_int("eval_steps");
  if (k.has("model_dir")) c.model_dir = k.get_string("model_dir");
  if (k.has("mode")) c.mode = k.get_string("mode");
  c.num_csx = opt_int("num_csx");
  c.compile_only = k.get_bool("compile_only", false);
  c.validate_only = k.get_bool("validate_only", false);
  if (c.max_steps && c.num_epochs)
    k.fail("num_epochs", "give max_steps or num_epochs, not both (max_steps is given at line " +
                             std::to_string(k.where("max_steps").line) + ")");
  return c;
}

// Before yaml-cpp sees the text: YAML's character set (printable characters of UTF-8; tab, line
// feed and carriage return). yaml-cpp passes invalid UTF-8 through into strings and reads a
// leading FF FE as a UTF-16 byte order mark, so binary garbage would otherwise parse.
void check_text(const std::string& file, const std::string& text) {
  int line = 1, column = 1;
  size_t i = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a UTF-8 byte order mark
  auto where = [&] { return file + ":" + std::to_string(line) + ":" + std::to_string(column); };
  while (i < text.size()) {
    uint32_t cp = 0;
    const size_t len = utf8_char(text, i, &cp);
    if (len == 0)
      fail(where(), ": not a YAML text: byte 0x", hex(static_cast<unsigned char>(text[i]), 2),
           " is not UTF-8 (is this a binary file, or text in another encoding?)");
    const bool printable = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0x7E) ||
                           cp == 0x85 || (cp >= 0xA0 && cp <= 0xD7FF) ||
                           (cp >= 0xE000 && cp <= 0xFFFD) || cp >= 0x10000;
    if (!printable)
      fail(where(), ": not a YAML text: character U+", hex(cp, 4),
           " is not allowed in YAML (is this a binary file?)");
    if (cp == 0xA) {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += len;
  }
}

// Where each document starts; the events of the nodes are not needed.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& m) override { marks.push_back(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

Params parse(const std::string& source, const std::string& file) {
  IPUML_CHECK(source.size() <= kMaxFileBytes, file, ": ", source.size(),
              " bytes, more than a params file's largest expected (", kMaxFileBytes, ")");
  check_text(file, source);
  Params p;
  p.file = file;
  const Reader r{file, &p.warnings};
  const std::vector<std::string> sections(std::begin(kSections), std::end(kSections));
  YAML::Node root;
  try {
    // Documents are counted first, at most two: YAML::LoadAll loops for ever, allocating, on a
    // document that starts with ',' (yaml-cpp 0.7 returns an empty document without consuming
    // the token; found by fuzz_cerebras_params), and a second document is refused anyway.
    std::istringstream in(source);
    YAML::Parser parser(in);
    DocumentStarts starts;
    while (starts.marks.size() < 2 && parser.HandleNextDocument(starts)) {
    }
    if (starts.marks.size() == 2 && starts.marks[1].pos == starts.marks[0].pos) {
      // Marks count from after a byte order mark.
      const size_t at = static_cast<size_t>(std::max(starts.marks[0].pos, 0)) +
                        (source.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0);
      r.fail(starts.marks[0], "",
             "not valid YAML: a document cannot start with " + shown(source.substr(at, 1)));
    }
    if (starts.marks.size() == 2)
      r.fail(starts.marks[1], "",
             "a second YAML document ('---'); expected one document with the sections " +
                 join(sections));
    root = YAML::Load(source);
  } catch (const YAML::DeepRecursion& e) {
    // Its own message says only "bad file".
    r.fail(e.mark, "",
           "not valid YAML: nested deeper than " + std::to_string(e.depth()) +
               " levels (yaml-cpp's limit)");
  } catch (const YAML::Exception& e) {
    r.fail(e.mark, "", "not valid YAML: " + e.msg);
  }
  if (is_null(root))
    fail(file, ": empty (no YAML mapping); expected the sections ", join(sections));
  if (!root.IsMap())
    r.fail(root.Mark(), "",
           "expected a mapping of the sections " + join(sections) + ", got " + describe(root));
  bool have_model = false, have_optimizer = false, have_runconfig = false;
  for (const auto& [name, kv] : entries(r, root, "")) {
    const auto& [key, value] = kv;
    if (name == "train_input") {
      p.train_input = read_input(r, key, value, name);
    } else if (name == "eval_input") {
      p.eval_input = read_input(r, key, value, name);
    } else if (name == "model") {
      p.model = read_model(r, key, value);
      have_model = true;
    } else if (name == "optimizer") {
      p.optimizer = read_optimizer(r, key, value);
      have_optimizer = true;
    } else if (name == "runconfig") {
      p.runconfig = read_runconfig(r, key, value);
      have_runconfig = true;
    } else if (name == "description") {  // older modelzoo configs open with one
      Section s("", r.at(key.Mark()));
      read_value(r, value, name, text("description"), s);
      p.description = s.get_string("description", "");
    } else {
      r.fail(key.Mark(), bare(name),
             "unknown section" + did_you_mean(name, sections) +
                 "; known sections: " + join(sections) + " (and a description string)");
    }
  }
  const Where top = r.at(root.Mark());
  if (!have_model) r.fail(top, "model", "missing (required section); expected name and sizes");
  if (!have_optimizer)
    r.fail(top, "optimizer", "missing (required section); expected optimizer_type, learning_rate");
  if (!have_runconfig)
    r.fail(top, "runconfig", "missing (required section); expected max_steps, log_steps, ...");
  if (!p.train_input && !p.eval_input)
    r.fail(top, "train_input", "missing: expected train_input, eval_input or both");
  if (p.model.name == "gptj") {
    const Section& mk = p.model.keys;
    for (const auto* in : {&p.train_input, &p.eval_input}) {
      if (!*in) continue;
      const Section& ik = (*in)->keys;
      if (ik.has("max_sequence_length") &&
          ik.get_int("max_sequence_length") > mk.get_int("max_position_embeddings"))
        ik.fail("max_sequence_length",
                std::to_string(ik.get_int("max_sequence_length")) +
                    " tokens per sample, more than model.max_position_embeddings=" +
                    std::to_string(mk.get_int("max_position_embeddings")));
      if (ik.has("vocab_size") && ik.get_int("vocab_size") != mk.get_int("vocab_size"))
        ik.fail("vocab_size", std::to_string(ik.get_int("vocab_size")) +
                                  ", but model.vocab_size is " +
                                  std::to_string(mk.get_int("vocab_size")));
    }
  }
  if (p.train_input && !p.runconfig.max_steps && !p.runconfig.num_epochs)
    p.runconfig.keys.fail("max_steps",
                          "missing: training (train_input) needs max_steps or "
                          "num_epochs");
  return p;
}

}  // namespace

// ---- Where and Section ----------------------------------------------------------------------

std::string Where::str() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::vector<std::string> Section::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : values_) out.push_back(k);
  return out;
}

const Where& Section::where(const std::string& key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? where_ : it->second.where;
}

void Section::fail(const std::string& key, const std::string& message) const {
  ipuml::fail(where(key).str(), ": ", path_, key.empty() ? "" : ".", key, ": ", message);
}

const Value& Section::at(const std::string& key, const char* expected_type) const {
  const auto it = values_.find(key);
  if (it == values_.end()) fail(key, std::string("missing; expected ") + expected_type);
  return it->second;
}

namespace {
template <typename T>
const T& typed(const Section& s, const Value& v, const std::string& key, const char* type) {
  if (const T* p = std::get_if<T>(&v.data)) return *p;
  s.fail(key, std::string("is not ") + type + " here");
}
}  // namespace

bool Section::get_bool(const std::string& key) const {
  return typed<bool>(*this, at(key, "true or false"), key, "true or false");
}
int64_t Section::get_int(const std::string& key) const {
  return typed<int64_t>(*this, at(key, "an integer"), key, "an integer");
}
double Section::get_float(const std::string& key) const {
  const Value& v = at(key, "a number");
  if (const int64_t* i = std::get_if<int64_t>(&v.data)) return static_cast<double>(*i);
  return typed<double>(*this, v, key, "a number");
}
const std::string& Section::get_string(const std::string& key) const {
  return typed<std::string>(*this, at(key, "a string"), key, "a string");
}
const std::vector<int64_t>& Section::get_int_list(const std::string& key) const {
  return typed<std::vector<int64_t>>(*this, at(key, "a list of integers"), key,
                                     "a list of integers");
}
std::vector<double> Section::get_float_list(const std::string& key) const {
  const Value& v = at(key, "a list of numbers");
  if (const auto* i = std::get_if<std::vector<int64_t>>(&v.data))
    return std::vector<double>(i->begin(), i->end());
  return typed<std::vector<double>>(*this, v, key, "a list of numbers");
}
bool Section::get_bool(const std::string& key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
int64_t Section::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double Section::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
std::string Section::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

// ---- entry points -------------------------------------------------------------------------

std::vector<std::string> known_models() {
  std::vector<std::string> out;
  for (const auto& s : model_schemas()) out.emplace_back(s.name);
  return out;
}

models::GPTJConfig gptj_config(const ModelParams& m) {
  IPUML_CHECK(m.name == "gptj", "gptj_config: model.name is '", m.name, "', not gptj");
  const Section& k = m.keys;
  const int64_t hidden = k.get_int("hidden_size");
  return models::GPTJConfig()
      .vocab_size(k.get_int("vocab_size"))
      .n_positions(k.get_int("max_position_embeddings"))
      .n_embd(hidden)
      .n_layer(k.get_int("num_hidden_layers"))
      .n_head(k.get_int("num_heads"))
      .rotary_dim(k.get_int("rotary_dim"))
      .n_inner(k.get_int("filter_size", 4 * hidden))
      .activation_function(k.get_string("nonlinearity", "gelu_new"))
      .layer_norm_epsilon(k.get_float("layer_norm_epsilon", 1e-5))
      .embd_pdrop(k.get_float("embedding_dropout_rate", 0.0))
      .attn_pdrop(k.get_float("attention_dropout_rate", 0.0))
      .resid_pdrop(k.get_float("residual_dropout_rate", 0.0))
      .initializer_range(k.get_float("initializer_range", 0.02))
      .tie_word_embeddings(k.get_bool("share_embedding_weights", false));
}

models::UNetConfig unet_config(const ModelParams& m) {
  IPUML_CHECK(m.name == "unet", "unet_config: model.name is '", m.name, "', not unet");
  const Section& k = m.keys;
  const auto& shape = k.get_int_list("image_shape");  // [H, W, C]
  std::vector<int64_t> enc = k.get_int_list("encoder_filters");
  const int64_t bottleneck = enc.back();  // the last is the bottleneck
  enc.pop_back();
  const int64_t classes = k.get_int("num_classes");
  const std::string loss = k.get_string("loss", classes <= 2 ? "bce" : "ssce");
  models::UNetConfig c;
  c.in_channels(shape[2])
      .num_classes(loss == "bce" ? 1 : classes)
      .encoder_filters(enc)
      .bottleneck(bottleneck)
      .decoder_filters(k.get_int_list("decoder_filters"))
      .convs_per_block(k.has("convs_per_block")
                           ? static_cast<int64_t>(k.get_int_list("convs_per_block").size())
                           : 2)
      .norm(lower(k.get_string("norm_layer", "")) == "batchnorm2d")
      .initializer(k.get_string("initializer", "pytorch"))
      .height(shape[0])
      .width(shape[1]);
  if (k.has("enable_bias")) c.enable_bias(k.get_bool("enable_bias"));
  return c;
}

Params parse_params(const std::string& text, const std::string& name_for_messages) {
  try {
    return parse(text, name_for_messages);
  } catch (const Error&) {
    throw;
  } catch (const YAML::Exception& e) {
    const Reader r{name_for_messages, nullptr};
    r.fail(e.mark, "", std::string("not valid YAML: ") + e.msg);
  } catch (const std::exception& e) {
    // yaml-cpp's containers may throw the standard exceptions (std::bad_alloc, ...).
    fail(name_for_messages, ": cannot be read: ", e.what());
  }
}

Params read_params(const std::string& path) {
  const std::vector<uint8_t> bytes = io::read_regular_file(path, "params file", kMaxFileBytes);
  return parse_params(std::string(bytes.begin(), bytes.end()), path);
}

}  // namespace ipuml::cerebras
