// nn::Functional: a function of one tensor as a module, so it can sit in a Sequential, as
// LibTorch's `nn::Functional(torch::relu)` or `nn::Functional(F::max_pool2d, options)`.
#pragma once

#include <functional>
#include <memory>
#include <tuple>
#include <utility>

#include <ipuml/nn/module.hpp>

namespace ipuml::nn {

class FunctionalImpl : public Module {
 public:
  using Function = std::function<Tensor(Tensor)>;

  explicit FunctionalImpl(Function function)
      : Module("Functional"), function_(std::move(function)) {
    IPUML_CHECK(static_cast<bool>(function_), "Functional: got an empty function");
  }
  // Binds the arguments after the input: Functional(F::max_pool2d, F::MaxPool2dFuncOptions(2))
  // calls F::max_pool2d(x, options).
  template <typename F, typename A0, typename... Args>
  FunctionalImpl(F function, A0&& a0, Args&&... args)
      : FunctionalImpl(
            Function([function, bound = std::make_tuple(std::forward<A0>(a0),
                                                        std::forward<Args>(args)...)](Tensor x) {
              return std::apply([&](const auto&... a) { return std::invoke(function, x, a...); },
                                bound);
            })) {}

  Tensor forward(const Tensor& x) override { return function_(x); }

 private:
  Function function_;
};
class Functional : public ModuleHolder<FunctionalImpl> {
 public:
  using ModuleHolder<FunctionalImpl>::ModuleHolder;
  // An overloaded name with its options (F::max_pool2d has several overloads): the options'
  // type picks the overload.
  template <typename A0>
  Functional(Tensor (*function)(const Tensor&, const A0&), A0 a0)
      : ModuleHolder<FunctionalImpl>(std::make_shared<FunctionalImpl>(FunctionalImpl::Function(
            [function, a0 = std::move(a0)](Tensor x) { return function(x, a0); }))) {}
};

}  // namespace ipuml::nn
