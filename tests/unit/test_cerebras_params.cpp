// The Cerebras-modelzoo params yaml reader (examples/cerebras/params.hpp): the shipped fc_mnist
// config and a file with every key read to the expected values, and hostile files (typos, wrong
// types, absurd sizes, NaN, duplicates, binary garbage, directories) refused with an ipuml::Error
// naming file:line:column and the key path.
#include <catch2/catch.hpp>

#include "../../examples/cerebras/params.hpp"
#include <ipuml/models/gptj.hpp>

#include "../support/error_of.hpp"
#include "../support/temp_dir.hpp"

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace ipuml;
using namespace ipuml::cerebras;
using ipuml::testing::error_of;

namespace {

// A small valid file; each hostile case replaces some of its lines (numbered from 1).
const std::vector<std::string> kBase = {
    "train_input:",                    // 1
    "  data_dir: ./data/mnist/train",  // 2
    "  batch_size: 64",                // 3
    "model:",                          // 4
    "  name: fc_mnist",                // 5
    "  depth: 3",                      // 6
    "  hidden_size: 128",              // 7
    "optimizer:",                      // 8
    "  optimizer_type: Adam",          // 9
    "  learning_rate: 0.001",          // 10
    "runconfig:",                      // 11
    "  max_steps: 100",                // 12
};

// kBase with line n replaced by `lines[n]` (which may hold several lines, or none: "").
std::string with(const std::map<int, std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < kBase.size(); ++i) {
    const auto it = lines.find(static_cast<int>(i) + 1);
    const std::string& line = it == lines.end() ? kBase[i] : it->second;
    if (!line.empty()) out += line + "\n";
  }
  return out;
}

// A small valid gptj file (the tiny GPT-J), for gptj_with.
const std::vector<std::string> kGptj = {
    "train_input:",                   // 1
    "  data_dir: ./data/tokens",      // 2
    "  batch_size: 8",                // 3
    "  max_sequence_length: 32",      // 4
    "model:",                         // 5
    "  name: gptj",                   // 6
    "  vocab_size: 64",               // 7
    "  hidden_size: 32",              // 8
    "  num_heads: 4",                 // 9
    "  num_hidden_layers: 2",         // 10
    "  rotary_dim: 4",                // 11
    "  max_position_embeddings: 32",  // 12
    "optimizer:",                     // 13
    "  optimizer_type: AdamW",        // 14
    "  learning_rate: 0.001",         // 15
    "runconfig:",                     // 16
    "  max_steps: 100",               // 17
};

std::string gptj_with(const std::map<int, std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < kGptj.size(); ++i) {
    const auto it = lines.find(static_cast<int>(i) + 1);
    const std::string& line = it == lines.end() ? kGptj[i] : it->second;
    if (!line.empty()) out += line + "\n";
  }
  return out;
}

std::string parse_error(const std::string& text) {
  return error_of([&] { parse_params(text, "params.yaml"); });
}

std::string source_file(const std::string& relative) {
  return std::string(IPUML_SOURCE_DIR) + "/" + relative;
}

}  // namespace

TEST_CASE("cerebras params: the shipped fc_mnist config", "[cerebras][params]") {
  const Params p = read_params(source_file("examples/cerebras/configs/fc_mnist.yaml"));
  CHECK(p.warnings.empty());
  REQUIRE(p.train_input);
  CHECK(p.train_input->data_dir == "./data/mnist/train");
  CHECK(p.train_input->batch_size == 64);
  CHECK(p.train_input->shuffle);
  CHECK(p.train_input->drop_last_batch);
  CHECK(p.train_input->to_float16);
  CHECK(p.train_input->num_workers == 0);
  CHECK_FALSE(p.train_input->shuffle_seed);
  REQUIRE(p.eval_input);
  CHECK(p.eval_input->data_dir == "./data/mnist/val");
  CHECK_FALSE(p.eval_input->shuffle);
  CHECK_FALSE(p.eval_input->to_float16);

  CHECK(p.model.name == "fc_mnist");
  CHECK(p.model.mixed_precision);
  CHECK(p.model.dropout == 0.2);
  CHECK(p.model.activation_fn == "relu");
  CHECK_FALSE(p.model.to_float16);
  CHECK(p.model.keys.get_int("depth") == 3);
  CHECK(p.model.keys.get_int("hidden_size") == 128);
  CHECK(p.model.keys.get_int_list("hidden_sizes") == std::vector<int64_t>{128, 128, 128});

  CHECK(p.optimizer.optimizer_type == "Adam");
  CHECK(p.optimizer.learning_rate == 0.001);
  CHECK(p.optimizer.beta1 == 0.9);
  CHECK(p.optimizer.beta2 == 0.999);
  CHECK_FALSE(p.optimizer.dynamic_loss_scaling);
  CHECK(p.optimizer.loss_scaling_factor == 1.0);
  CHECK_FALSE(p.optimizer.max_gradient_norm);

  CHECK(p.runconfig.max_steps == 10000);
  CHECK_FALSE(p.runconfig.num_epochs);
  CHECK(p.runconfig.log_steps == 100);
  CHECK(p.runconfig.checkpoint_steps == 2000);
  CHECK(p.runconfig.seed == 1);
  CHECK(p.runconfig.save_losses);
  // Each value remembers where it was written, for the program's later messages.
  CHECK(p.model.keys.where("hidden_size").line == 26);
  CHECK(p.model.keys.where("hidden_size").column == 18);
  CHECK_THAT(error_of([&] { p.model.keys.fail("hidden_size", "not divisible by 3"); }),
             Catch::Equals(source_file("examples/cerebras/configs/fc_mnist.yaml") +
                           ":26:18: model.hidden_size: not divisible by 3"));
}

TEST_CASE("cerebras params: the shipped bert_large_msl128 config", "[cerebras][params]") {
  const Params p = read_params(source_file("examples/cerebras/configs/bert_large_msl128.yaml"));
  CHECK(p.warnings.empty());
  REQUIRE(p.train_input);
  CHECK(p.train_input->batch_size == 1024);
  CHECK(p.train_input->keys.get_int("max_sequence_length") == 128);
  CHECK(p.train_input->keys.get_int("max_predictions_per_seq") == 20);
  CHECK(p.train_input->keys.get_string("data_processor") == "BertCSVDataProcessor");
  CHECK(p.model.name == "bert");
  CHECK(p.model.mixed_precision);
  const Section& k = p.model.keys;
  CHECK(k.get_int("vocab_size") == 30522);
  CHECK(k.get_int("hidden_size") == 1024);
  CHECK(k.get_int("num_hidden_layers") == 24);
  CHECK(k.get_int("num_heads") == 16);
  CHECK(k.get_int("filter_size") == 4096);
  CHECK(k.get_string("encoder_nonlinearity") == "gelu");
  CHECK(k.get_float("layer_norm_epsilon") == 1e-5);
  CHECK(p.optimizer.optimizer_type == "AdamW");
  CHECK(p.optimizer.dynamic_loss_scaling);
  CHECK(p.optimizer.max_gradient_norm == 1.0);
}

TEST_CASE("cerebras params: bert keys ipuml cannot honour are refused by name",
          "[cerebras][params][hostile]") {
  const std::string head =
      "train_input:\n  data_dir: d\n  batch_size: 8\n  max_sequence_length: 16\nmodel:\n"
      "  name: bert\n  vocab_size: 100\n  hidden_size: 30\n  num_hidden_layers: 2\n"
      "  filter_size: 64\n";
  const std::string tail =
      "optimizer:\n  optimizer_type: AdamW\n  learning_rate: 0.001\nrunconfig:\n"
      "  max_steps: 1\n";
  auto refused = [&](const std::string& extra) {
    return error_of([&] { parse_params(head + extra + tail, "bert.yaml"); });
  };
  CHECK_THAT(refused("  num_heads: 4\n"),
             Catch::Contains("bert.yaml:") &&
                 Catch::Contains("model.num_heads: hidden_size 30 must divide by num_heads 4"));
  CHECK_THAT(refused("  num_heads: 3\n  disable_nsp: True\n"),
             Catch::Contains("model.disable_nsp: true is not supported"));
  CHECK_THAT(refused("  num_heads: 3\n  share_embedding_weights: False\n"),
             Catch::Contains("model.share_embedding_weights: false is not supported"));
  CHECK_THAT(refused("  num_heads: 3\n  position_embedding_type: rotary\n"),
             Catch::Contains("model.position_embedding_type"));
  CHECK_THAT(refused(""), Catch::Contains("model.num_heads"));
  CHECK_NOTHROW(parse_params(head + "  num_heads: 3\n" + tail, "bert.yaml"));
}

TEST_CASE("cerebras params: the shipped unet config and what unet refuses",
          "[cerebras][params][unet]") {
  const Params p = read_params(source_file("examples/cerebras/configs/unet.yaml"));
  CHECK(p.warnings.empty());
  REQUIRE(p.train_input);
  CHECK(p.train_input->batch_size == 32);
  CHECK(p.model.name == "unet");
  const Section& k = p.model.keys;
  CHECK(k.get_int_list("image_shape") == std::vector<int64_t>{256, 256, 1});
  CHECK(k.get_int("input_channels") == 1);  // from image_shape
  CHECK(k.get_int("num_classes") == 2);
  CHECK(k.get_int_list("encoder_filters") == std::vector<int64_t>{64, 128, 256, 512, 1024});
  CHECK(k.get_int_list("decoder_filters") == std::vector<int64_t>{512, 256, 128, 64});
  CHECK(k.get_int_list("convs_per_block") == std::vector<int64_t>{0, 0});  // 3x3_conv twice
  CHECK(k.get_string("loss") == "bce");
  CHECK(k.get_string("norm_layer") == "batchnorm2d");
  CHECK_FALSE(k.get_bool("enable_bias"));
  CHECK(p.optimizer.learning_rate == 1e-4);

  // A unet file: the base with its model section replaced.
  auto unet = [](const std::string& extra, const std::string& drop = "") {
    std::string model =
        "  name: unet\n  image_shape: [64, 64, 3]\n  num_classes: 2\n"
        "  encoder_filters: [8, 16, 32]\n  decoder_filters: [16, 8]\n";
    if (!drop.empty()) {
      const size_t at = model.find("  " + drop + ":");
      model.erase(at, model.find('\n', at) - at + 1);
    }
    return with({{5, model + extra}, {6, ""}, {7, ""}});
  };
  const Params small = parse_params(unet(""), "params.yaml");
  CHECK(small.model.keys.get_int("input_channels") == 3);
  // Each refusal names the line of the key that asks for what the model does not build.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  skip_connect: false", "params.yaml:10:17: model.skip_connect: false is not supported"},
      {"  residual_blocks: true", "model.residual_blocks: true is not supported"},
      {"  downscale_method: strided_conv",
       "model.downscale_method: 'strided_conv' is not supported"},
      {"  nonlinearity: GELU", "model.nonlinearity: 'GELU' is not supported"},
      {"  norm_layer: group", "model.norm_layer: 'group' is not supported; expected batchnorm2d"},
      {"  loss: ssce_dice", "model.loss: 'ssce_dice' is not supported"},
      {"  loss: dice", "model.loss: expected one of bce, ssce, multilabel_bce, ssce_dice, got"},
      {"  initializer: orthogonal", "model.initializer: 'orthogonal' is not supported"},
      {"  initializer: {name: glorot_uniform, gain: 1.0}",
       "model.initializer: expected a string, got a mapping"},
      {"  bias_initializer: ones", "model.bias_initializer: only 'zeros' is supported"},
      {"  convs_per_block: [3x3_conv, 1x1_conv]",
       "model.convs_per_block: entry 1 is 1x1_conv: ipuml's UNet builds 3x3_conv only"},
      {"  convs_per_block: [3x3_conv, 5x5_conv]",
       "params.yaml:10:31: model.convs_per_block[1]: expected one of 3x3_conv, 3x3_dw_conv, "
       "1x1_conv, got '5x5_conv'"},
      {"  convs_per_block: []", "model.convs_per_block: expected a list of 1 to 16 entries"},
      {"  input_channels: 1", "model.input_channels: 1 differs from image_shape's 3 channels"},
      {"  dropout_rate: 0.1", "model.dropout_rate: only 0 is supported"},
      {"  use_conv3d: true", "model.use_conv3d: true is not supported"},
      {"  norm_kwargs: {num_groups: 4}", "model.norm_kwargs: unknown key for model 'unet'"},
  };
  for (const auto& [line, message] : cases) {
    INFO(line);
    CHECK_THAT(parse_error(unet(line)), Catch::Contains(message));
  }
  CHECK_THAT(parse_error(unet("  loss: bce", "num_classes") + ""),
             Catch::Contains("model.num_classes: missing (required)"));
  CHECK_THAT(parse_error(unet("  num_classes: 3\n  loss: bce", "num_classes")),
             Catch::Contains("model.num_classes: loss bce needs num_classes: 2"));
  CHECK(parse_params(unet("  num_classes: 3\n  loss: ssce", "num_classes"), "params.yaml")
            .model.keys.get_int("num_classes") == 3);
  CHECK_THAT(parse_error(unet("  decoder_filters: [16]", "decoder_filters")),
             Catch::Contains("model.decoder_filters: expected 2 entries (one fewer than "
                             "encoder_filters, whose last is the bottleneck), got 1"));
  CHECK_THAT(parse_error(unet("  image_shape: [62, 64, 3]", "image_shape")),
             Catch::Contains("model.image_shape: UNetConfig: an image of 62x64 cannot go through "
                             "2 2x2 max-pools"));
}

TEST_CASE("cerebras params: every key of a full file", "[cerebras][params]") {
  const std::string text = R"(# a comment
train_input:
  data_dir: /data/mnist
  batch_size: 1024
  shuffle: false
  drop_last_batch: no
  to_float16: yes
  num_workers: 4
  shuffle_seed: 7
  prefetch_factor: 2
eval_input:
  data_dir: "/data/mnist val"
  batch_size: 256
  shuffle: On
model:
  name: FC_MNIST
  mixed_precision: false
  hidden_sizes: [256, 64,
                 32]
  dropout: 0.0
  activation_fn: Tanh
optimizer:
  optimizer_type: sgd
  learning_rate: 1e-2
  momentum: 0.9
  weight_decay_rate: 0.0001
  loss_scaling_factor: dynamic
  max_gradient_norm: 1
  beta1: 0.8
  log_summaries: true
runconfig:
  num_epochs: 3
  log_steps: 10
  checkpoint_steps: 0
  seed: 0
  save_losses: False
  eval_steps: 50
  model_dir: ./model_dir
  mode: train_and_eval
  num_csx: 2
  compile_only: false
  validate_only: true
  mount_dirs: [/a, /b]
description: "FC-MNIST base model params"
)";
  const Params p = parse_params(text, "full.yaml");
  CHECK(p.file == "full.yaml");
  CHECK(p.description == "FC-MNIST base model params");
  REQUIRE(p.train_input);
  CHECK(p.train_input->data_dir == "/data/mnist");
  CHECK(p.train_input->batch_size == 1024);
  CHECK_FALSE(p.train_input->shuffle);
  CHECK_FALSE(p.train_input->drop_last_batch);
  CHECK(p.train_input->to_float16);
  CHECK(p.train_input->num_workers == 4);
  CHECK(p.train_input->shuffle_seed == 7);
  REQUIRE(p.eval_input);
  CHECK(p.eval_input->data_dir == "/data/mnist val");
  CHECK(p.eval_input->batch_size == 256);
  CHECK(p.eval_input->shuffle);
  CHECK(p.eval_input->drop_last_batch);
  CHECK_FALSE(p.eval_input->to_float16);

  CHECK(p.model.name == "fc_mnist");  // the schema's spelling
  CHECK_FALSE(p.model.mixed_precision);
  CHECK(p.model.dropout == 0.0);
  CHECK(p.model.activation_fn == "tanh");
  CHECK(p.model.keys.get_int_list("hidden_sizes") == std::vector<int64_t>{256, 64, 32});
  CHECK(p.model.keys.get_int("depth") == 3);
  CHECK_FALSE(p.model.keys.has("hidden_size"));
  CHECK(p.model.keys.get_int("hidden_size", 5) == 5);

  CHECK(p.optimizer.optimizer_type == "SGD");
  CHECK(p.optimizer.learning_rate == 0.01);
  CHECK(p.optimizer.momentum == 0.9);
  CHECK(p.optimizer.weight_decay_rate == 0.0001);
  CHECK(p.optimizer.dynamic_loss_scaling);
  CHECK(p.optimizer.max_gradient_norm == 1.0);
  CHECK(p.optimizer.beta1 == 0.8);

  CHECK_FALSE(p.runconfig.max_steps);
  CHECK(p.runconfig.num_epochs == 3);
  CHECK(p.runconfig.log_steps == 10);
  CHECK(p.runconfig.checkpoint_steps == 0);
  CHECK(p.runconfig.seed == 0);
  CHECK_FALSE(p.runconfig.save_losses);
  CHECK(p.runconfig.eval_steps == 50);
  CHECK(p.runconfig.model_dir == "./model_dir");
  CHECK(p.runconfig.mode == "train_and_eval");
  CHECK(p.runconfig.num_csx == 2);
  CHECK_FALSE(p.runconfig.compile_only);
  CHECK(p.runconfig.validate_only);

  // Accepted but unused keys are reported with their place (the optimizer's keys that its type
  // does not use after the section's other warnings).
  REQUIRE(p.warnings.size() == 4);
  CHECK_THAT(p.warnings[0], Catch::StartsWith("full.yaml:10:3: train_input.prefetch_factor: "));
  CHECK_THAT(p.warnings[1], Catch::StartsWith("full.yaml:30:3: optimizer.log_summaries: "));
  CHECK_THAT(p.warnings[2], Catch::StartsWith("full.yaml:29:10: optimizer.beta1: not used by SGD"));
  CHECK_THAT(p.warnings[3], Catch::StartsWith("full.yaml:43:3: runconfig.mount_dirs: "));

  // The typed getters name the key when it is absent or of another type.
  CHECK_THAT(error_of([&] { p.model.keys.get_int("num_heads"); }),
             Catch::Equals("full.yaml:15:1: model.num_heads: missing; expected an integer"));
  CHECK_THAT(error_of([&] { p.model.keys.get_string("dropout"); }),
             Catch::Equals("full.yaml:20:12: model.dropout: is not a string here"));
  CHECK(p.model.keys.get_float_list("hidden_sizes") == std::vector<double>{256, 64, 32});
}

TEST_CASE("cerebras params: defaults where the file says nothing", "[cerebras][params]") {
  const Params p = parse_params(with({}), "params.yaml");
  CHECK_FALSE(p.eval_input);
  CHECK(p.train_input->shuffle);
  CHECK(p.train_input->drop_last_batch);
  CHECK_FALSE(p.train_input->to_float16);
  CHECK_FALSE(p.model.mixed_precision);
  CHECK(p.model.dropout == 0.0);
  CHECK(p.model.activation_fn == "relu");
  CHECK(p.optimizer.momentum == 0.0);
  CHECK(p.optimizer.weight_decay_rate == 0.0);
  CHECK(p.optimizer.eps == 1e-8);
  CHECK(p.optimizer.loss_scaling_factor == 1.0);
  CHECK(p.runconfig.log_steps == 1);
  CHECK(p.runconfig.checkpoint_steps == 0);
  CHECK_FALSE(p.runconfig.seed);
  CHECK_FALSE(p.runconfig.save_losses);
  // A key given as null is not set; a null section is empty.
  const Params q = parse_params(with({{3, "  batch_size: 8\n  shuffle: ~\n  to_float16:"}}), "p");
  CHECK(q.train_input->shuffle);
  CHECK_FALSE(q.train_input->to_float16);
  CHECK(known_models() == std::vector<std::string>{"fc_mnist", "bert", "gptj", "unet"});
}

TEST_CASE("cerebras params: micro_batch_size as a size or auto or explore or none",
          "[cerebras][params]") {
  // Absent: neither set (the program's default is auto in weight streaming).
  const Params none_given = parse_params(with({}), "params.yaml");
  CHECK_FALSE(none_given.train_input->micro_batch_size);
  CHECK(none_given.train_input->micro_batch_mode.empty());
  const Params fixed = parse_params(with({{3, "  batch_size: 64\n  micro_batch_size: 16"}}), "p");
  CHECK(fixed.train_input->micro_batch_size == 16);
  CHECK(fixed.train_input->micro_batch_mode.empty());
  for (const std::string word : {"auto", "explore", "none"}) {
    const Params p =
        parse_params(with({{3, "  batch_size: 64\n  micro_batch_size: " + word}}), "p");
    CHECK_FALSE(p.train_input->micro_batch_size);
    CHECK(p.train_input->micro_batch_mode == word);
  }
  // Any case, quoted or not, as the other words; stored as spelled in the schema.
  const Params upper =
      parse_params(with({{3, "  batch_size: 64\n  micro_batch_size: 'AUTO'"}}), "p");
  CHECK(upper.train_input->micro_batch_mode == "auto");
  // eval_input takes it too.
  const Params eval = parse_params(
      "eval_input:\n  data_dir: d\n  batch_size: 32\n  micro_batch_size: 8\n" + with({}), "p");
  CHECK(eval.eval_input->micro_batch_size == 8);
  CHECK(eval.train_input->micro_batch_size == std::nullopt);

  const std::string want =
      "train_input.micro_batch_size: expected an integer in [1, 1048576] or one of auto, "
      "explore, none, got ";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"0", "'0'"},
      {"-1", "'-1'"},
      {"sometimes", "'sometimes'"},
      {"[8, 16]", "a list"},
      {"\"16\"", "the quoted string '16'"},
      {"2097152", "'2097152' (a cap"},
  };
  for (const auto& r : refused) {
    const std::string& value = r.first;
    const std::string& got = r.second;
    INFO(value);
    CHECK_THAT(error_of([&] {
                 parse_params(with({{3, "  batch_size: 64\n  micro_batch_size: " + value}}),
                              "params.yaml");
               }),
               Catch::Matchers::StartsWith("params.yaml:4:21: " + want + got));
  }
}

TEST_CASE("cerebras params: hostile values name file, line, column and key path",
          "[cerebras][params][hostile]") {
  struct Case {
    std::map<int, std::string> lines;
    std::string message;  // a part of the error
  };
  const std::vector<Case> cases = {
      // typos in keys and sections
      {{{7, "  hiden_size: 128"}},
       "params.yaml:7:3: model.hiden_size: unknown key for model 'fc_mnist' (did you mean "
       "'hidden_size'?); known keys: name, mixed_precision, dropout, activation_fn, to_float16, "
       "depth, hidden_size, hidden_sizes, compute_eval_metrics"},
      {{{8, "optimiser:"}},
       "params.yaml:8:1: optimiser: unknown section (did you mean 'optimizer'?); known sections: "
       "train_input, eval_input, model, optimizer, runconfig (and a description string)"},
      {{{3, "  batch_size: 64\n  learning_rate: 0.1"}},
       "params.yaml:4:3: train_input.learning_rate: unknown key; known keys: data_dir"},
      // missing keys and sections
      {{{5, ""}},
       "params.yaml:4:1: model.name: missing (required); expected one of fc_mnist, bert, gptj, "
       "unet before the model's keys"},
      {{{9, ""}}, "params.yaml:8:1: optimizer.optimizer_type: missing (required)"},
      {{{2, ""}}, "params.yaml:1:1: train_input.data_dir: missing (required); expected a string"},
      {{{6, ""}}, "params.yaml:4:1: model.depth: missing; fc_mnist's hidden_size needs depth"},
      {{{7, ""}}, "params.yaml:4:1: model.hidden_size: missing; fc_mnist's depth needs"},
      {{{11, ""}, {12, ""}}, "params.yaml:1:1: runconfig: missing (required section)"},
      {{{12, "  log_steps: 10"}},
       "params.yaml:11:1: runconfig.max_steps: missing: training (train_input) needs max_steps "
       "or num_epochs"},
      {{{1, "eval_input:"}, {12, "  max_steps: 10\n  num_epochs: 2"}},
       "params.yaml:13:15: runconfig.num_epochs: give max_steps or num_epochs, not both"},
      {{{1, ""}, {2, ""}, {3, ""}},
       "params.yaml:1:1: train_input: missing: expected train_input, eval_input or both"},
      // wrong types
      {{{10, "  learning_rate: fast"}},
       "params.yaml:10:18: optimizer.learning_rate: expected a number > 0, got 'fast'"},
      {{{10, "  learning_rate: [[0.1, 100], [0.01, 200]]"}},
       "params.yaml:10:18: optimizer.learning_rate: learning-rate schedules (a list or mapping) "
       "are not supported yet; expected a number > 0, got a list"},
      {{{10, "  learning_rate: {scheduler: Linear}"}},
       "params.yaml:10:18: optimizer.learning_rate: learning-rate schedules"},
      {{{3, "  batch_size: \"64\""}},
       "params.yaml:3:15: train_input.batch_size: expected an integer in [1, 1048576], got the "
       "quoted string '64'"},
      {{{3, "  batch_size: 64.0"}},
       "params.yaml:3:15: train_input.batch_size: expected an integer in [1, 1048576], got "
       "'64.0'"},
      {{{3, "  batch_size: 064"}},
       "params.yaml:3:15: train_input.batch_size: expected an "
       "integer in [1, 1048576], got '064' (a leading 0 makes it"},
      {{{3, "  batch_size: 64\n  shuffle: maybe"}},
       "params.yaml:4:12: train_input.shuffle: expected true or false, got 'maybe'"},
      {{{9, "  optimizer_type: RMSProp"}},
       "params.yaml:9:19: optimizer.optimizer_type: expected one of SGD, Adam, AdamW (any case), "
       "got 'RMSProp'"},
      {{{5, "  name: [fc_mnist]"}},
       "params.yaml:5:9: model.name: expected one of fc_mnist, bert, gptj, unet, got a list"},
      {{{5, "  name: resnet"}},
       "params.yaml:5:9: model.name: expected one of fc_mnist, bert, gptj, unet, got 'resnet'"},
      {{{7, "  hidden_size: 128\n  activation_fn: softplus"}},
       "params.yaml:8:18: model.activation_fn: expected one of relu, tanh, gelu, sigmoid, got "
       "'softplus'"},
      {{{4, "model: [1, 2]"}, {5, ""}, {6, ""}, {7, ""}},
       "params.yaml:4:8: model: expected a mapping of keys (name, mixed_precision"},
      {{{6, "  depth: !!python/object:os.system 3"}},
       "params.yaml:6:10: model.depth: the tag 'tag:yaml.org,2002:python/object:os.syste...' is "
       "not supported; expected a plain value"},
      {{{2, "  data_dir: \"./data\\x00/etc\""}},
       "params.yaml:2:13: train_input.data_dir: expected a string without control characters, "
       "got './data\\x00/etc'"},
      {{{2, "  data_dir: ''"}},
       "params.yaml:2:13: train_input.data_dir: expected a non-empty string, got ''"},
      {{{2, "  ? [a, b]\n  : 1"}}, "params.yaml:2:5: train_input: expected a key name, got a list"},
      // negative, zero, absurd sizes; NaN and infinities
      {{{3, "  batch_size: -64"}},
       "params.yaml:3:15: train_input.batch_size: expected an integer in [1, 1048576], got '-64'"},
      {{{3, "  batch_size: 0"}}, "train_input.batch_size: expected an integer in [1, 1048576]"},
      {{{3, "  batch_size: 1073741824"}},
       "params.yaml:3:15: train_input.batch_size: expected an integer in [1, 1048576], got "
       "'1073741824' (a cap that keeps what is sized from it allocatable)"},
      {{{12, "  max_steps: 99999999999999999999999"}},
       "params.yaml:12:14: runconfig.max_steps: expected an integer in [1, 1099511627776], got "
       "'99999999999999999999999', which is out of range"},
      {{{7, "  hidden_size: 2000000"}}, "params.yaml:7:16: model.hidden_size: expected an integer"},
      {{{6, "  depth: 5000"}}, "params.yaml:6:10: model.depth: expected an integer in [1, 4096]"},
      {{{6, "  depth: 4096"}, {7, "  hidden_size: 1048576"}},
       "params.yaml:7:16: model.hidden_size: FcMnistConfig: 4096 hidden layers (the widest "
       "1048576) need 4502505243279370 parameters, expected at most 2^32"},
      {{{6, ""}, {7, "  hidden_sizes: [128, x]"}},
       "params.yaml:6:23: model.hidden_sizes[1]: expected a list of 1 to 4096 entries, each an "
       "integer in [1, 1048576], got 'x'"},
      {{{6, ""}, {7, "  hidden_sizes: []"}},
       "params.yaml:6:17: model.hidden_sizes: expected a list of 1 to 4096 entries"},
      {{{7, "  hidden_size: 128\n  hidden_sizes: [1, 2]"}},
       "params.yaml:8:17: model.hidden_sizes: give depth and hidden_size, or hidden_sizes, not "
       "both"},
      {{{10, "  learning_rate: .nan"}},
       "params.yaml:10:18: optimizer.learning_rate: expected a number > 0 (finite), got '.nan'"},
      {{{10, "  learning_rate: .inf"}}, "optimizer.learning_rate: expected a number > 0 (finite)"},
      {{{10, "  learning_rate: -1e-3"}},
       "params.yaml:10:18: optimizer.learning_rate: expected a number > 0, got '-1e-3'"},
      {{{10, "  learning_rate: 1e999"}}, "optimizer.learning_rate: expected a number > 0, got "},
      {{{7, "  hidden_size: 128\n  dropout: 1.0"}},
       "params.yaml:8:12: model.dropout: expected a number in [0, 1), got '1.0'"},
      {{{10, "  learning_rate: 0.1\n  loss_scaling_factor: -2"}},
       "params.yaml:11:24: optimizer.loss_scaling_factor: expected a number > 0 or 'dynamic'"},
      // duplicates
      {{{7, "  hidden_size: 128\n  depth: 4"}},
       "params.yaml:8:3: model.depth: duplicate key (first given at line 6)"},
      {{{12, "  max_steps: 100\nmodel:\n  name: fc_mnist"}},
       "params.yaml:13:1: model: duplicate key (first given at line 4)"},
      // structure
      {{{12, "  max_steps: 100\n---\nmodel: {}"}}, "params.yaml:13:1: a second YAML document"},
      {{{3, "  batch_size: [64"}},
       "params.yaml:4:6: not valid YAML: end of sequence flow not found"},
  };
  for (const Case& c : cases) {
    const std::string text = with(c.lines);
    INFO(text);
    CHECK_THAT(parse_error(text), Catch::Contains(c.message));
  }
}

TEST_CASE("cerebras params: files that are not params files", "[cerebras][params][hostile]") {
  CHECK_THAT(parse_error(""), Catch::Equals("params.yaml: empty (no YAML mapping); expected the "
                                            "sections train_input, eval_input, model, optimizer, "
                                            "runconfig"));
  CHECK_THAT(parse_error("# only a comment\n\n"), Catch::StartsWith("params.yaml: empty"));
  CHECK_THAT(parse_error("---\n...\n"), Catch::StartsWith("params.yaml: empty"));
  CHECK_THAT(parse_error("fc_mnist\n"),
             Catch::StartsWith("params.yaml:1:1: expected a mapping of the sections "
                               "train_input, eval_input, model, optimizer, runconfig, got "
                               "'fc_mnist'"));
  CHECK_THAT(parse_error("- model\n- optimizer\n"),
             Catch::StartsWith("params.yaml:1:1: expected a mapping of the sections"));
  // Binary garbage, other encodings and YAML's forbidden characters, before yaml-cpp sees them.
  CHECK_THAT(parse_error(with({}) + "\x89PNG\r\n\x1a\n"),
             Catch::Equals("params.yaml:13:1: not a YAML text: byte 0x89 is not UTF-8 (is this a "
                           "binary file, or text in another encoding?)"));
  CHECK_THAT(parse_error(std::string("\xff\xfem\0o\0d\0", 8)),
             Catch::StartsWith("params.yaml:1:1: not a YAML text: byte 0xff is not UTF-8"));
  CHECK_THAT(parse_error(std::string("model:\n  name: a\0b\n", 19)),
             Catch::Equals("params.yaml:2:10: not a YAML text: character U+0000 is not allowed in "
                           "YAML (is this a binary file?)"));
  CHECK_THAT(parse_error("model:\n  name: caf\xc3\n"),
             Catch::StartsWith("params.yaml:2:12: not a YAML text: byte 0xc3 is not UTF-8"));
  CHECK_THAT(parse_error("a: \xed\xa0\x80\n"),  // a UTF-16 surrogate written as UTF-8
             Catch::StartsWith("params.yaml:1:4: not a YAML text: byte 0xed"));
  // UTF-8 is read, with or without a byte order mark.
  const Params bom = parse_params("\xEF\xBB\xBF" + with({{2, "  data_dir: ./données/ÿ"}}), "p");
  CHECK(bom.train_input->data_dir == "./données/ÿ");
  CHECK_THAT(parse_error(std::string(size_t{1} << 21, ' ')),
             Catch::Contains("2097152 bytes, more than a params file's largest expected"));
  // yaml-cpp's LoadAll never returns on a document that starts with ',' (found by fuzzing).
  CHECK_THAT(parse_error("\xef\xbb\xbf,model:\n  name: fc_mnist\n  dethp: 2\n  hbage\n"),
             Catch::Equals("params.yaml:1:1: not valid YAML: a document cannot start with ','"));
  CHECK_THAT(parse_error("\n  ,\n"),
             Catch::Equals("params.yaml:2:3: not valid YAML: a document cannot start with ','"));
  CHECK_THAT(parse_error("model: {}\n---\n,\n"),
             Catch::StartsWith("params.yaml:2:1: a second YAML document ('---')"));
  // Deep nesting ends in yaml-cpp's depth guard, not a stack overflow.
  CHECK_THAT(parse_error("model: " + std::string(100000, '[')),
             Catch::Equals("params.yaml:1:1: not valid YAML: nested deeper than 500 levels "
                           "(yaml-cpp's limit)"));
  // Aliases share nodes (no expansion); values still checked where they are used.
  const Params alias =
      parse_params(with({{3, "  batch_size: &b 32"}, {12, "  max_steps: *b"}}), "alias.yaml");
  CHECK(alias.runconfig.max_steps == 32);
}

TEST_CASE("cerebras params: paths that are not readable files", "[cerebras][params][hostile]") {
  ipuml::testing::TempDir dir("ipuml_cerebras_params");
  CHECK_THAT(error_of([&] { read_params(dir.path.string()); }),
             Catch::Contains("params file '" + dir.path.string() +
                             "': is a directory, expected a regular file"));
  CHECK_THAT(error_of([&] { read_params(dir.file("missing.yaml")); }),
             Catch::Contains("params file '" + dir.file("missing.yaml") + "': no such file"));
  const std::string fifo = dir.file("fifo.yaml");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(error_of([&] { read_params(fifo); }), Catch::Contains("FIFO"));
  const std::string bad = dir.file("bad.yaml");
  std::ofstream(bad) << with({{10, "  learning_rate: fast"}});
  CHECK_THAT(error_of([&] { read_params(bad); }),
             Catch::StartsWith(bad + ":10:18: optimizer.learning_rate: expected a number > 0"));
  const std::string good = dir.file("good.yaml");
  std::ofstream(good) << with({});
  CHECK(read_params(good).file == good);
}

TEST_CASE("cerebras params: inputs fuzzing kept are refused", "[cerebras][params][hostile]") {
  // tests/fuzz/regressions/cerebras_params-*: each an ipuml::Error, at once.
  const std::filesystem::path dir = source_file("tests/fuzz/regressions");
  int replayed = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("cerebras_params-", 0) != 0) continue;
    INFO(e.path().string());
    CHECK_THAT(error_of([&] { read_params(e.path().string()); }),
               Catch::StartsWith(e.path().string() + ":"));
    ++replayed;
  }
  CHECK(replayed >= 1);
}

TEST_CASE("cerebras params: the shipped gptj configs", "[cerebras][params][gptj]") {
  const Params p = read_params(source_file("examples/cerebras/configs/gptj_6b.yaml"));
  CHECK(p.warnings.empty());
  REQUIRE(p.train_input);
  CHECK(p.train_input->batch_size == 64);
  CHECK(p.train_input->keys.get_int("max_sequence_length") == 2048);
  CHECK(p.train_input->keys.get_int("vocab_size") == 50400);
  CHECK(p.model.name == "gptj");
  CHECK(p.model.mixed_precision);
  CHECK(p.model.keys.get_int("hidden_size") == 4096);
  CHECK(p.model.keys.get_int("filter_size") == 16384);
  CHECK(p.optimizer.optimizer_type == "AdamW");
  CHECK(p.optimizer.learning_rate == 1.2e-4);
  CHECK(p.optimizer.weight_decay_rate == 0.1);
  CHECK(p.optimizer.dynamic_loss_scaling);
  CHECK(p.runconfig.max_steps == 350000);
  const models::GPTJConfig c = gptj_config(p.model), ref = models::GPTJConfig::gptj_6b();
  CHECK(c.vocab_size() == ref.vocab_size());
  CHECK(c.n_positions() == ref.n_positions());
  CHECK(c.n_embd() == ref.n_embd());
  CHECK(c.n_layer() == ref.n_layer());
  CHECK(c.n_head() == ref.n_head());
  CHECK(c.rotary_dim() == ref.rotary_dim());
  CHECK(c.inner_dim() == ref.inner_dim());
  CHECK(c.activation_function() == "gelu_new");
  CHECK(c.layer_norm_epsilon() == 1e-5);
  CHECK_FALSE(c.tie_word_embeddings());
  CHECK(c.num_parameters() == 6'050'882'784);

  const Params t = read_params(source_file("examples/cerebras/configs/gptj_tiny.yaml"));
  CHECK(t.warnings.empty());
  const models::GPTJConfig tc = gptj_config(t.model), tiny = models::GPTJConfig::tiny();
  CHECK(tc.num_parameters() == tiny.num_parameters());
  CHECK(tc.rotary_features() == 4);
  CHECK(tc.head_dim() == 8);
  models::GPTJForCausalLM net(tc);
  CHECK(net(zeros({2, 32}, kInt64)).shape() == Shape{2, 32, 64});

  // The defaults of the keys a file may leave out: GPT-J's.
  const models::GPTJConfig d = gptj_config(parse_params(gptj_with({}), "p").model);
  CHECK(d.inner_dim() == 128);
  CHECK(d.activation_function() == "gelu_new");
  CHECK(d.resid_pdrop() == 0.0);
  CHECK_FALSE(d.tie_word_embeddings());
  CHECK(gptj_config(parse_params(gptj_with({{12,
                                             "  max_position_embeddings: 32\n"
                                             "  share_embedding_weights: true\n"
                                             "  embedding_dropout_rate: 0.1"}}),
                                 "p")
                        .model)
            .tie_word_embeddings());
  CHECK_THAT(error_of([] { gptj_config(parse_params(with({}), "p").model); }),
             Catch::Contains("gptj_config: model.name is 'fc_mnist', not gptj"));
}

TEST_CASE("cerebras params: gptj sizes that make no GPT-J name the key",
          "[cerebras][params][gptj][hostile]") {
  struct Case {
    std::map<int, std::string> lines;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{8, "  hidden_size: 30"}},
       "params.yaml:9:14: model.num_heads: hidden_size=30 is not divisible by num_heads=4"},
      {{{11, "  rotary_dim: 16"}},
       "params.yaml:11:15: model.rotary_dim: must be even and at most the head size hidden_size "
       "/ num_heads = 8, got 16"},
      {{{11, "  rotary_dim: 3"}}, "params.yaml:11:15: model.rotary_dim: must be even"},
      {{{11, ""}}, "params.yaml:5:1: model.rotary_dim: missing (required); expected an integer"},
      {{{9, "  num_head: 4"}},
       "params.yaml:9:3: model.num_head: unknown key for model 'gptj' (did you mean "
       "'num_heads'?)"},
      {{{12, "  max_position_embeddings: 32\n  use_bias_in_output: false"}},
       "params.yaml:13:23: model.use_bias_in_output: false is not supported: GPT-J's lm_head has "
       "a bias"},
      {{{12, "  max_position_embeddings: 32\n  dropout: 0.1"}},
       "params.yaml:13:12: model.dropout: not read for gptj; its keys are "
       "embedding_dropout_rate, attention_dropout_rate and residual_dropout_rate"},
      {{{12, "  max_position_embeddings: 32\n  nonlinearity: relu"}},
       "params.yaml:13:17: model.nonlinearity: expected one of gelu_new, gelu, got 'relu'"},
      {{{12, "  max_position_embeddings: 32\n  position_embedding_type: learned"}},
       "model.position_embedding_type: expected one of rotary, got 'learned'"},
      {{{12, "  max_position_embeddings: 32\n  attention_dropout_rate: 1.0"}},
       "params.yaml:13:27: model.attention_dropout_rate: expected a number in [0, 1), got '1.0'"},
      {{{12, "  max_position_embeddings: 32\n  layer_norm_epsilon: 0"}},
       "model.layer_norm_epsilon: expected a number in (0, 1), got '0'"},
      {{{4, "  max_sequence_length: 64"}},
       "params.yaml:4:24: train_input.max_sequence_length: 64 tokens per sample, more than "
       "model.max_position_embeddings=32"},
      {{{4, "  max_sequence_length: 32\n  vocab_size: 50257"}},
       "params.yaml:5:15: train_input.vocab_size: 50257, but model.vocab_size is 64"},
      {{{8, "  hidden_size: 1048576"}, {9, "  num_heads: 1"}, {10, "  num_hidden_layers: 4096"}},
       "params.yaml:8:16: model.hidden_size: these sizes make 54043225729531968 parameters, "
       "expected at most 2^40"},
      {{{10, "  num_hidden_layers: 0"}},
       "model.num_hidden_layers: expected an integer in [1, 4096], got '0'"},
  };
  for (const Case& c : cases) {
    const std::string text = gptj_with(c.lines);
    INFO(text);
    CHECK_THAT(parse_error(text), Catch::Contains(c.message));
  }
}
