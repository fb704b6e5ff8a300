// Containers: Sequential (chains the children's single-tensor forwards) and ModuleList (holds
// modules for the owner's own forward). Children are named "0", "1", ... as in PyTorch.
#pragma once

#include <memory>
#include <string>
#include <type_traits>

#include <ipuml/nn/module.hpp>

namespace ipuml::nn {

namespace detail {

// A holder (`Linear(...)`) or a shared_ptr to a Module subclass.
template <typename M>
concept ModuleLike = requires(const M& m) {
  { m.ptr() } -> std::convertible_to<std::shared_ptr<Module>>;
}
|| std::is_convertible_v<M, std::shared_ptr<Module>>;

template <ModuleLike M>
std::shared_ptr<Module> as_module(const M& m) {
  if constexpr (requires { m.ptr(); })
    return m.ptr();
  else
    return m;
}

// What Sequential and ModuleList share: an ordered, index-named list of children.
class ModuleListBase : public Module {
 public:
  using Module::Module;

  template <ModuleLike M>
  void push_back(const M& m) {
    register_module(std::to_string(size()), as_module(m));
  }
  size_t size() const { return named_children().size(); }
  bool is_empty() const { return size() == 0; }

  std::shared_ptr<Module> ptr(size_t i) const {
    IPUML_CHECK(i < size(), type_name(), ": index ", i, " is out of range for ", size(),
                " modules");
    return named_children()[i].second;
  }
  std::shared_ptr<Module> operator[](size_t i) const { return ptr(i); }
  // The i-th module as its concrete type: `seq->at<LinearImpl>(0).weight`.
  template <typename T>
  T& at(size_t i) const {
    auto p = std::dynamic_pointer_cast<T>(ptr(i));
    IPUML_CHECK(p != nullptr, type_name(), ": module ", i, " is a ", ptr(i)->type_name(),
                ", not the requested type");
    return *p;
  }

  auto begin() const { return named_children().begin(); }
  auto end() const { return named_children().end(); }
};

}  // namespace detail

class SequentialImpl : public detail::ModuleListBase {
 public:
  SequentialImpl() : ModuleListBase("Sequential") {}
  template <detail::ModuleLike M0, detail::ModuleLike... Ms>
  explicit SequentialImpl(const M0& m0, const Ms&... ms) : SequentialImpl() {
    push_back(m0);
    (push_back(ms), ...);
  }

  // Each child's output is the next child's input; an empty Sequential returns its input.
  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (auto& [name, m] : named_children()) y = m->forward(y);
    return y;
  }
};
IPUML_MODULE(Sequential);

class ModuleListImpl : public detail::ModuleListBase {
 public:
  ModuleListImpl() : ModuleListBase("ModuleList") {}
  template <detail::ModuleLike M0, detail::ModuleLike... Ms>
  explicit ModuleListImpl(const M0& m0, const Ms&... ms) : ModuleListImpl() {
    push_back(m0);
    (push_back(ms), ...);
  }
  // Appends every module of `other` (shared, not copied).
  void extend(const ModuleListImpl& other) {
    for (auto& [name, m] : other.named_children()) push_back(m);
  }
};
IPUML_MODULE(ModuleList);

}  // namespace ipuml::nn
