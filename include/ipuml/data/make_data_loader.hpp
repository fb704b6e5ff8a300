// LibTorch's make_data_loader<Sampler>(dataset, batch_size): a std::unique_ptr to an ipuml
// DataLoader, sequential or shuffled as the sampler type says (iterate `*loader`).
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include <ipuml/data/dataloader.hpp>
#include <ipuml/data/samplers.hpp>

namespace ipuml::data {

// torch::data::samplers' names.
namespace samplers {
using data::RandomSampler;
using data::Sampler;
using data::SequentialSampler;
}  // namespace samplers

// RandomSampler (the default, as in LibTorch) reshuffles every epoch from options.seed();
// SequentialSampler keeps the dataset's order.
template <typename S = RandomSampler, Dataset D>
std::unique_ptr<DataLoader<D>> make_data_loader(D dataset, DataLoaderOptions options) {
  static_assert(std::is_same_v<S, RandomSampler> || std::is_same_v<S, SequentialSampler>,
                "make_data_loader: the sampler must be RandomSampler or SequentialSampler (give "
                "DataLoader a std::shared_ptr<Sampler> for any other)");
  options.shuffle(std::is_same_v<S, RandomSampler>);
  return std::make_unique<DataLoader<D>>(std::move(dataset), options);
}
template <typename S = RandomSampler, Dataset D>
std::unique_ptr<DataLoader<D>> make_data_loader(D dataset, int64_t batch_size) {
  return make_data_loader<S>(std::move(dataset), DataLoaderOptions(batch_size));
}

}  // namespace ipuml::data
