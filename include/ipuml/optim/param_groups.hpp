// Weight decay only where it regularises: Graphcore's and torchvision's recipes decay the conv
// and linear weights (more than one dimension) and leave norm parameters and biases alone.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include <ipuml/core/error.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::optim {

struct DecayGroups {
  std::vector<Tensor> decay;     // parameters with more than one dimension
  std::vector<Tensor> no_decay;  // biases, norm weights and biases (one dimension or scalars)
};

inline DecayGroups split_for_weight_decay(const std::vector<Tensor>& params) {
  DecayGroups g;
  for (const Tensor& p : params) (p.dim() > 1 ? g.decay : g.no_decay).push_back(p);
  return g;
}

// An optimizer of two parameter groups: `options` for the decayed parameters, the same
// options with weight_decay 0 for the rest (a group is left out when it would be empty).
// `Opt` is any optimizer constructed as Opt(params, options) with an options type that has
// weight_decay(double), e.g. make_with_decay_groups<SGD>(net->parameters(), SGDOptions(...)).
template <typename Opt, typename Options>
std::unique_ptr<Opt> make_with_decay_groups(const std::vector<Tensor>& params,
                                            const Options& options) {
  DecayGroups g = split_for_weight_decay(params);
  Options plain = options;
  plain.weight_decay(0.0);
  IPUML_CHECK(!params.empty(), "make_with_decay_groups: no parameters");
  if (g.decay.empty()) return std::make_unique<Opt>(std::move(g.no_decay), plain);
  auto opt = std::make_unique<Opt>(std::move(g.decay), options);
  if (!g.no_decay.empty()) opt->add_param_group(std::move(g.no_decay), plain);
  return opt;
}

}  // namespace ipuml::optim
