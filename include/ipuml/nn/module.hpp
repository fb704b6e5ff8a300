// nn::Module: named, recursive parameters, buffers and children; train/eval; state_dict with
// shape checks; PyTorch-style printing. Subclass it as FooImpl and wrap with IPUML_MODULE(Foo).
#pragma once

#include <memory>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/tensor/ops.hpp>

namespace ipuml::nn {

// One name -> tensor entry. Both `auto& [name, t] : m->named_parameters()` and LibTorch's
// `for (auto& item : m->named_parameters()) item.key(); item.value();` read it.
struct NamedTensor : std::pair<std::string, Tensor> {
  using std::pair<std::string, Tensor>::pair;
  NamedTensor(std::pair<std::string, Tensor> p) : std::pair<std::string, Tensor>(std::move(p)) {}
  const std::string& key() const { return first; }
  Tensor& value() { return second; }
  const Tensor& value() const { return second; }
};

// Ordered name -> tensor pairs (parameters and buffers), keyed like "layer1.conv.weight".
using StateDict = std::vector<NamedTensor>;

// The entry named `name`, or null.
const Tensor* find_in(const StateDict& d, const std::string& name);

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // The uniform single-tensor forward Sequential uses; modules with other signatures keep
  // their own forward and leave this one refusing.
  virtual Tensor forward(const Tensor& x);

  // Registration (names must be unique and contain no '.').
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    check_name(name);
    IPUML_CHECK(m != nullptr, type_name_, ": register_module('", name, "') got a null module");
    children_.emplace_back(name, m);
    return m;
  }
  // Holder form: `fc = register_module("fc", Linear(LinearOptions(4, 2)));`.
  template <typename H>
  requires requires(const H& h) {
    h.ptr();
    typename H::ImplType;
  }
  H register_module(const std::string& name, H holder) {
    register_module(name, holder.ptr());
    return holder;
  }
  // Replaces a registered parameter, keeping its place; ties weights as PyTorch's
  // `head.weight = wte.weight` does: `head->weight = head->replace_parameter("weight",
  // wte->weight);` (the tensor is then listed once by parameters(), under its first name).
  Tensor& replace_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // Replaces a registered child (used by BeginBlock-style wrappers).
  void replace_module(const std::string& name, std::shared_ptr<Module> m);

  // Access, depth-first in registration order (the checkpoint key order). A tensor registered
  // in two places (a tied embedding and LM head) is listed once, under the first name, as
  // PyTorch's named_parameters does, so an optimizer steps it once. state_dict() keeps both
  // names (as PyTorch's does) so checkpoints load into either layout.
  StateDict named_parameters(bool recurse = true) const;
  StateDict named_buffers(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules(
      const std::string& prefix = "") const;

  // Mode.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // PopTorch's BeginBlock: when this module is called, it and everything after it run on
  // device `ipu` of a model-parallel program (a placement recorded into traced graph nodes;
  // eager runs ignore it). -1: no block starts here.
  void begin_block(int ipu);
  int block_placement() const { return block_placement_; }

  void zero_grad();

  // Parameters then buffers, each in registration order.
  StateDict state_dict() const;
  // Copies values in place (so optimizers and traced graphs keep seeing the same tensors).
  void load_state_dict(const StateDict& d, bool strict = true);

  // PyTorch's module.to(dtype) / .half(): every floating-point parameter and buffer, here and in
  // the children, becomes `dtype` in place (round to nearest even). The Tensor handles stay the
  // same, so modules keep their members; gradients are dropped. Build the optimizer afterwards
  // (its state follows the parameters it is given).
  Module& to(DType dtype);
  // LibTorch's module->to(device): every parameter and buffer, here and in the children, moves
  // to `device` in place (its values copied there, with its gradient). The Tensor handles stay
  // the same, so an optimizer built before still steps them; its state stays where it was made,
  // so build the optimizer after the move (as in LibTorch) when it keeps state.
  Module& to(Device device);
  Module& to(Device device, DType dtype);
  Module& half() { return to(kFloat16); }
  Module& bfloat16() { return to(kBFloat16); }
  Module& float32() { return to(kFloat32); }

  // PyTorch's repr: "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))".
  virtual std::string extra_repr() const;
  void print(std::ostream& os, int indent = 0) const;
  std::string to_string() const;

 protected:
  void set_type_name(std::string n) { type_name_ = std::move(n); }

 private:
  void check_name(const std::string& name) const;
  void collect(StateDict& out, const std::string& prefix, bool recurse, bool params,
               bool bufs) const;

  std::string type_name_;
  bool training_ = true;
  int block_placement_ = -1;
  StateDict params_;
  StateDict buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

// The holder idiom: `Linear fc(LinearOptions(4, 2)); fc(x); fc->weight;`, sharing the Impl.
template <typename Impl>
class ModuleHolder {
 public:
  using ImplType = Impl;
  // Default-constructs the Impl when it can (as LibTorch does); `Foo f{nullptr}` stays empty.
  ModuleHolder() {
    if constexpr (std::is_default_constructible_v<Impl>) impl_ = std::make_shared<Impl>();
  }
  ModuleHolder(std::nullptr_t) {}
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  template <typename A0, typename... Args,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<A0>, std::shared_ptr<Impl>> &&
                                        !std::is_same_v<std::decay_t<A0>, ModuleHolder> &&
                                        !std::is_same_v<std::decay_t<A0>, std::nullptr_t>>>
  explicit ModuleHolder(A0&& a0, Args&&... args)
      : impl_(std::make_shared<Impl>(std::forward<A0>(a0), std::forward<Args>(args)...)) {}

  Impl* operator->() const { return checked(); }
  Impl& operator*() const { return *checked(); }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }
  operator std::shared_ptr<Module>() const { return impl_; }

  template <typename... Args>
  decltype(auto) operator()(Args&&... args) const {
    if (checked()->block_placement() >= 0)
      ir::PlacementGuard::set_current(checked()->block_placement());
    return checked()->forward(std::forward<Args>(args)...);
  }
  // Indexing goes to the module, as in LibTorch: `seq[0]` on a Sequential or ModuleList.
  template <typename Arg>
  decltype(auto) operator[](Arg&& arg) const {
    return (*checked())[std::forward<Arg>(arg)];
  }

 private:
  Impl* checked() const {
    IPUML_CHECK(impl_ != nullptr, "use of an empty module holder");
    return impl_.get();
  }
  std::shared_ptr<Impl> impl_;
};

template <typename Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& m) {
  return os << *m;
}

}  // namespace ipuml::nn

// Declares `Name` as the holder of `NameImpl`.
#define IPUML_MODULE(Name)                                     \
  class Name : public ::ipuml::nn::ModuleHolder<Name##Impl> {  \
   public:                                                     \
    using ::ipuml::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/nn/module_impl.hpp>
#endif
