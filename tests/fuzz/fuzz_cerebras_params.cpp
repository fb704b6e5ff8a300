// libFuzzer harness: the Cerebras-modelzoo params yaml reader (examples/cerebras/params.cpp, with
// yaml-cpp underneath) on arbitrary bytes. Every input is read or refused with an ipuml::Error
// naming the file; a file it accepts keeps the promises the program relies on, and its network,
// when small, builds and runs.
#include <ipuml/ipuml.hpp>
#include <ipuml/models/fc_mnist.hpp>

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
  // What the reader promises of an accepted file.
  const auto& sizes = p.model.keys.get_int_list("hidden_sizes");
  if (p.model.name != "fc_mnist" || sizes.empty() ||
      p.model.keys.get_int("depth") != static_cast<int64_t>(sizes.size()))
    __builtin_trap();
  for (const auto* in : {&p.train_input, &p.eval_input})
    if (*in && ((*in)->batch_size < 1 || (*in)->batch_size > (int64_t{1} << 20))) __builtin_trap();
  if (!p.train_input && !p.eval_input) __builtin_trap();
  if (!(p.optimizer.learning_rate > 0) || !std::isfinite(p.optimizer.learning_rate) ||
      !(p.model.dropout >= 0 && p.model.dropout < 1))
    __builtin_trap();
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
