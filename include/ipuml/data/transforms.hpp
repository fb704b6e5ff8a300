// Sample transforms for Dataset::map(), starting with Normalize (per-channel (x - mean) / std).
// Transforms are plain callables Example -> Example; see the Transform concept in dataset.hpp.
#pragma once

#include <utility>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/data/example.hpp>

namespace ipuml::data::transforms {

namespace normalize_detail {
// Normalize's values and arithmetic, compiled once; Normalize<> below is its LibTorch face.
class NormalizeImpl {
 public:
  NormalizeImpl(double mean, double stddev);
  NormalizeImpl(std::vector<double> mean, std::vector<double> stddev);

  Example operator()(Example e) const;
  Tensor apply(const Tensor& data) const;

  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& stddev() const { return std_; }

 private:
  std::vector<double> mean_;
  std::vector<double> std_;
};
}  // namespace normalize_detail

// (x - mean[c]) / std[c] on float32 data, with the channel at dim -3 as in torchvision, so the
// same transform serves one image [C,H,W] and a batch [B,C,H,W]. One mean/std pair applies to
// every element whatever the rank. The target passes through unchanged.
// A class template as LibTorch's, so `Normalize<>(0.1307, 0.3081)` and `Normalize(0.5, 0.5)`
// both compile; `Target` (LibTorch's target type) is unused: ipuml has the one Example type.
template <typename Target = Tensor>
class Normalize : public normalize_detail::NormalizeImpl {
 public:
  static constexpr bool batchable = true;

  Normalize(double mean, double stddev) : NormalizeImpl(mean, stddev) {}
  Normalize(std::vector<double> mean, std::vector<double> stddev)
      : NormalizeImpl(std::move(mean), std::move(stddev)) {}
};

// LibTorch's Stack<>: there it turns a list of examples into one batch. ipuml's DataLoader
// stacks by itself, so this passes examples and batches through unchanged (ported pipelines'
// `.map(Stack<>())` keep compiling and keep the batch fast path).
template <typename T = Example>
struct Stack {
  static constexpr bool batchable = true;
  Example operator()(Example e) const { return e; }
};

}  // namespace ipuml::data::transforms

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/data/transforms_impl.hpp>
#endif
