// libFuzzer harness: the Cerebras-modelzoo params yaml reader (examples/cerebras/params.cpp, with
// yaml-cpp underneath) on arbitrary bytes. Every input is read or refused with an ipuml::Error
// naming the file; a file it accepts keeps the promises the program relies on, and its network,
// when small, builds and runs.
#include <ipuml/ipuml.hpp>
#include <ipuml/models/fc_mnist.hpp>
#include <ipuml/models/gptj.hpp>
#include <ipuml/models/unet.hpp>

#include "../../examples/cerebras/params.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ipuml;
  cerebras::Params p;
  try {
    p = cerebras::parse_params(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  } catch (const Error& e) {
    if (std::string(e.what()).rfind("fuzz.yaml", 0) != 0) __builtin_trap();  // names the file
    return 0;
  }
  // What the reader promises of an accepted file: every model's keys make its network's config.
  const auto& k = p.model.keys;
  if (p.model.name == "bert") {
    if (k.get_int("hidden_size") % k.get_int("num_heads") != 0) __builtin_trap();
  } else if (p.model.name == "gptj" || p.model.name == "unet") {
    try {
      if (p.model.name == "gptj") {
        const models::GPTJConfig c = cerebras::gptj_config(p.model);
        c.validate();
        if (c.num_parameters() > (int64_t{1} << 40)) __builtin_trap();
      } else {
        cerebras::unet_config(p.model).validate();
      }
    } catch (const Error&) {
      __builtin_trap();  // accepted, so its config must be one the model builds
    }
  } else if (p.model.name != "fc_mnist") {
    __builtin_trap();
  }
  for (const auto* in : {&p.train_input, &p.eval_input})
    if (*in && ((*in)->batch_size < 1 || (*in)->batch_size > (int64_t{1} << 20))) __builtin_trap();
  for (const auto* in : {&p.train_input, &p.eval_input})
    if (*in && (*in)->micro_batch_size &&
        (*(*in)->micro_batch_size < 1 || *(*in)->micro_batch_size > (int64_t{1} << 20)))
      __builtin_trap();
  if (!p.train_input && !p.eval_input) __builtin_trap();
  if (!(p.optimizer.learning_rate > 0) || !std::isfinite(p.optimizer.learning_rate) ||
      !(p.model.dropout >= 0 && p.model.dropout < 1))
    __builtin_trap();
  if (p.model.name != "fc_mnist") return 0;
  const auto& sizes = k.get_int_list("hidden_sizes");
  if (sizes.empty() || k.get_int("depth") != static_cast<int64_t>(sizes.size())) __builtin_trap();
  for (const int64_t h : sizes)
    if (h > 64 || sizes.size() > 4) return 0;  // valid, but too large to build many times a second
  try {
    models::FcMnist net(models::FcMnistConfig()
                            .hidden_sizes(sizes)
                            .dropout(p.model.dropout)
                            .activation_fn(p.model.activation_fn));
    const Tensor y = net(zeros({2, 784}));
    if (y.sizes() != Shape{2, 10}) __builtin_trap();
  } catch (const Error&) {
    __builtin_trap();  // the reader accepted it: building and running must work
  }
  return 0;
}
