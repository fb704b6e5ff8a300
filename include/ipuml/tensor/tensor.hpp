// Tensor: a shared handle to shape, strides, dtype and storage, plus autograd state.
// Copies share the same tensor (as in PyTorch); views share storage; clone() copies data.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/core/device.hpp>
#include <ipuml/core/dtype.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/core/shape.hpp>
#include <ipuml/tensor/storage.hpp>

namespace ipuml {

namespace autograd {
struct Node;
}
namespace indexing {
class TensorIndex;
}

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // null for a symbolic (traced) tensor
  int64_t offset = 0;                // in elements
  Shape shape;
  Strides strides;
  DType dtype = DType::Float32;

  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  int output_nr = 0;
  std::shared_ptr<autograd::Node> grad_accumulator;  // leaves only; made on first use
  uint64_t version = 0;                              // bumped by in-place ops

  // Tracing: the graph value this tensor stands for while trace `trace_id` is active.
  int64_t value = -1;
  uint64_t trace_id = 0;
  // A tensor that views another one records its base so in-place tracing can refuse it.
  bool is_view = false;
};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::Int32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::Float16;
}

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  const Shape& shape() const { return checked().shape; }
  const Shape& sizes() const { return shape(); }
  const Strides& strides() const { return checked().strides; }
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
  int64_t numel() const { return ipuml::numel(shape()); }
  DType dtype() const { return checked().dtype; }
  // Where the values live and whose kernels run ops on it; a symbolic (traced) tensor says cpu.
  Device device() const {
    const auto& st = checked().storage;
    return st ? st->device() : Device();
  }
  int64_t offset() const { return checked().offset; }
  bool is_contiguous() const {
    const auto& s = shape();
    const auto& st = strides();
    int64_t expect = 1;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] != 1 && st[i] != expect) return false;
      expect *= s[i];
    }
    return true;
  }
  // A traced tensor stands for a graph value and holds no data.
  bool is_symbolic() const { return checked().storage == nullptr; }
  // A tensor on the meta device has a shape and a dtype but no values.
  bool is_meta() const {
    const auto& st = checked().storage;
    return st && st->device().is_meta();
  }

  // Raw element access (eager tensors only).
  void* raw_data() const {
    require_data("data access");
    return static_cast<char*>(impl_->storage->data()) +
           impl_->offset * static_cast<int64_t>(dtype_size(impl_->dtype));
  }
  template <typename T>
  T* data_ptr() const {
    IPUML_CHECK(
        dtype_of<T>() == dtype() || (dtype() == DType::BFloat16 && dtype_of<T>() == DType::Float16),
        "data_ptr: tensor has dtype ", dtype_name(dtype()), ", asked for ",
        dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw_data());
  }
  // The values as a flat row-major vector (converts float16/bfloat16 to float).
  template <typename T>
  std::vector<T> to_vector() const;
  template <typename T>
  T item() const {
    IPUML_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ",
                shape_str(shape()));
    return to_vector<T>()[0];
  }

  // Autograd.
  bool requires_grad() const { return checked().requires_grad; }
  Tensor& requires_grad_(bool on = true);
  Tensor& set_requires_grad(bool on) { return requires_grad_(on); }
  Tensor grad() const { return Tensor(checked().grad); }
  void set_grad(const Tensor& g) { checked().grad = g.impl_; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return checked().grad_fn; }
  bool is_leaf() const { return checked().grad_fn == nullptr; }
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  // Copies, conversions.
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor detach() const;
  Tensor to(DType t) const;
  // A copy on `device` (this tensor itself when it is there already); gradients flow back.
  Tensor to(Device device) const;
  Tensor to(Device device, DType t) const;
  Tensor cpu() const { return to(Device(kCPU)); }

  // Views (share storage in eager mode).
  Tensor reshape(const Shape& s) const;
  Tensor view(const Shape& s) const { return reshape(s); }
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& s) const;
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;

  // Common ops as members (free functions in ops.hpp are the full set).
  Tensor sum(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor mean(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor amax(std::vector<int64_t> dims, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor relu() const;
  Tensor pow(double exponent) const;
  Tensor matmul(const Tensor& o) const;
  // The ops transformer code calls as methods in LibTorch.
  Tensor add(const Tensor& o, double alpha = 1.0) const;
  Tensor add(double s) const;
  Tensor sub(const Tensor& o) const;
  Tensor sub(double s) const;
  Tensor mul(const Tensor& o) const;
  Tensor mul(double s) const;
  Tensor div(const Tensor& o) const;
  Tensor div(double s) const;
  Tensor neg() const;
  Tensor rsqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;
  Tensor le(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor eq(double s) const;
  Tensor ne(double s) const;
  Tensor lt(double s) const;
  Tensor le(double s) const;
  Tensor gt(double s) const;
  Tensor ge(double s) const;
  Tensor amin(std::vector<int64_t> dims, bool keepdim = false) const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor var(std::vector<int64_t> dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor masked_fill(const Tensor& mask, double value) const;
  // torch.Tensor.where(condition, other): this where condition holds, else other.
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor bmm(const Tensor& o) const;
  Tensor baddbmm(const Tensor& batch1, const Tensor& batch2, double beta = 1.0,
                 double alpha = 1.0) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  Tensor expand_as(const Tensor& o) const { return expand(o.shape()); }
  Tensor reshape_as(const Tensor& o) const { return reshape(o.shape()); }
  Tensor view_as(const Tensor& o) const { return reshape(o.shape()); }

  // LibTorch's indexing, `x.index({Slice(1, None), 0, Ellipsis, mask})` and
  // `x.index_put_({...}, v)`: the index types are in ipuml/tensor/indexing.hpp.
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& value);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, double value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, double value);

  // In-place (for optimizers and initialisation; refused on tensors autograd must track).
  Tensor& add_(const Tensor& o, double alpha = 1.0);
  Tensor& sub_(const Tensor& o) { return add_(o, -1.0); }
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(double s);
  Tensor& div_(const Tensor& o);
  Tensor& add_(double s);
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double v);
  Tensor& zero_() { return fill_(0.0); }

 private:
  TensorImpl& checked() const {
    IPUML_CHECK(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  void require_data(const char* what) const {
    IPUML_CHECK(checked().storage != nullptr, what,
                ": tensor is symbolic (recorded while tracing a graph) and holds no values");
    IPUML_CHECK(!impl_->storage->device().is_meta(), what, ": tensor of shape ",
                shape_str(impl_->shape),
                " is on the meta device, which holds shapes but no values (build the model "
                "without a meta DefaultDeviceGuard, or load values into a real-device model)");
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace ipuml

// The index types Tensor::index takes, complete wherever Tensor is.
#include <ipuml/tensor/indexing.hpp>
