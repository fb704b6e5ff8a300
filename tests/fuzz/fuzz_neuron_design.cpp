// libFuzzer harness: what a Neuron-Inverter design yaml reaches inside the library. The yaml is
// parsed by the example (examples/neuron_inverter/main.cpp, yaml-cpp, not reachable from a
// library header), which hands the numbers to NeuronInverterDesign; here they come from the
// input as whitespace-separated integers: features time_bins outputs n_conv (filter kernel
// pool)... n_fc dim... dropout_percent batch_norm. Every design must validate or throw
// ipuml::Error; a valid one whose sizes are all small is built and run on one sample.
#include <ipuml/ipuml.hpp>
#include <ipuml/models/neuron_inverter.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ipuml;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<int64_t> v;
  std::string word;
  while (in >> word && v.size() < 64) v.push_back(std::strtoll(word.c_str(), nullptr, 0));
  size_t at = 0;
  auto next = [&]() -> int64_t { return at < v.size() ? v[at++] : 1; };
  models::NeuronInverterDesign d;
  d.num_features(next()).num_time_bins(next()).num_outputs(next());
  std::vector<int64_t> filters, kernels, pools, fc;
  const int64_t n_conv = next() & 3;
  for (int64_t i = 0; i < n_conv; ++i) {
    filters.push_back(next());
    kernels.push_back(next());
    pools.push_back(next());
  }
  const int64_t n_fc = next() & 3;
  for (int64_t i = 0; i < n_fc; ++i) fc.push_back(next());
  d.conv_filters(filters).conv_kernels(kernels).pool_sizes(pools).fc_dims(fc);
  d.dropout(static_cast<double>(next()) / 100.0).batch_norm_flat(next() & 1);
  try {
    d.validate();
  } catch (const Error&) {
    return 0;
  }
  for (const int64_t x : v)
    if (x > 64) return 0;  // valid, but too large to build many times a second
  try {
    models::NeuronInverter net(d);
    const Tensor y = net(randn({2, d.num_time_bins(), d.num_features()}));
    if (y.sizes() != Shape{2, d.num_outputs()}) __builtin_trap();
  } catch (const Error&) {
    __builtin_trap();  // validate() accepted it: building and running must work
  }
  return 0;
}
