// Tensor's member functions (thin forwards to the free ops) and printing.
#pragma once

#include <iomanip>
#include <sstream>

#include <ipuml/tensor/ops_common_impl.hpp>

namespace ipuml {

IPUML_INLINE Tensor& Tensor::requires_grad_(bool on) {
  IPUML_CHECK(!on || is_floating(dtype()),
              "requires_grad: only floating-point tensors can require "
              "gradients, this one is ",
              dtype_name(dtype()));
  IPUML_CHECK(is_leaf() || on, "requires_grad_(false) on a non-leaf tensor; use detach()");
  checked().requires_grad = on;
  return *this;
}

IPUML_INLINE void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::run_backward({*this}, {gradient}, retain_graph);
}

IPUML_INLINE Tensor Tensor::contiguous() const { return ipuml::contiguous(*this); }

IPUML_INLINE Tensor Tensor::clone() const {
  if (is_symbolic()) return ops_detail::run1(ir::OpKind::Copy, {}, {*this});
  Tensor out = detail::empty_on(shape(), dtype(), device());
  if (is_meta())
    ;  // shapes only
  else if (is_contiguous())
    std::memcpy(out.raw_data(), raw_data(), static_cast<size_t>(numel()) * dtype_size(dtype()));
  else
    ops_detail::strided_copy(*this, out.raw_data());
  autograd::attach({out}, "CloneBackward", {*this}, [](const std::vector<Tensor>& g) { return g; });
  return out;
}

IPUML_INLINE Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  const TensorImpl& s = checked();
  impl->storage = s.storage;
  impl->offset = s.offset;
  impl->shape = s.shape;
  impl->strides = s.strides;
  impl->dtype = s.dtype;
  impl->value = s.value;
  impl->trace_id = s.trace_id;
  impl->version = s.version;
  impl->is_view = true;
  return Tensor(std::move(impl));
}

IPUML_INLINE Tensor Tensor::to(DType t) const { return cast(*this, t); }
IPUML_INLINE Tensor Tensor::to(Device d) const {
  // A traced tensor stands for a value of the one graph being captured; devices are the
  // compiled program's business there.
  if (is_symbolic() || d == device()) return *this;
  Tensor out = detail::copy_to_device(*this, d);
  const Device from = device();
  autograd::attach({out}, "ToCopyBackward", {*this}, [from](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].defined() ? g[0].to(from) : g[0]};
  });
  return out;
}
IPUML_INLINE Tensor Tensor::to(Device d, DType t) const { return to(t).to(d); }
IPUML_INLINE Tensor Tensor::reshape(const Shape& s) const { return ipuml::reshape(*this, s); }
IPUML_INLINE Tensor Tensor::permute(const std::vector<int64_t>& d) const {
  return ipuml::permute(*this, d);
}
IPUML_INLINE Tensor Tensor::transpose(int64_t a, int64_t b) const {
  return ipuml::transpose(*this, a, b);
}
IPUML_INLINE Tensor Tensor::t() const {
  IPUML_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dims, got shape ", shape_str(shape()));
  return dim() < 2 ? *this : ipuml::transpose(*this, 0, 1);
}
IPUML_INLINE Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const {
  return ipuml::narrow(*this, d, s, l);
}
IPUML_INLINE Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const {
  return ipuml::slice(*this, d, s, e, st);
}
IPUML_INLINE Tensor Tensor::select(int64_t d, int64_t i) const {
  d = wrap_dim(d, dim(), "select");
  const int64_t n = shape()[d];
  IPUML_CHECK(i >= -n && i < n, "select: index ", i, " is out of range for dim ", d, " of size ",
              n);
  if (i < 0) i += n;
  return ipuml::squeeze(ipuml::slice(*this, d, i, i + 1), d);
}
IPUML_INLINE Tensor Tensor::expand(const Shape& s) const { return ipuml::expand(*this, s); }
IPUML_INLINE Tensor Tensor::squeeze(int64_t d) const { return ipuml::squeeze(*this, d); }
IPUML_INLINE Tensor Tensor::squeeze() const {
  Shape s;
  for (auto d : shape())
    if (d != 1) s.push_back(d);
  return ipuml::reshape(*this, s);
}
IPUML_INLINE Tensor Tensor::unsqueeze(int64_t d) const { return ipuml::unsqueeze(*this, d); }
IPUML_INLINE Tensor Tensor::flatten(int64_t a, int64_t b) const {
  return ipuml::flatten(*this, a, b);
}
IPUML_INLINE Tensor Tensor::sum(std::vector<int64_t> d, bool k) const {
  return ipuml::sum(*this, std::move(d), k);
}
IPUML_INLINE Tensor Tensor::mean(std::vector<int64_t> d, bool k) const {
  return ipuml::mean(*this, std::move(d), k);
}
IPUML_INLINE Tensor Tensor::amax(std::vector<int64_t> d, bool k) const {
  return ipuml::amax(*this, std::move(d), k);
}
IPUML_INLINE Tensor Tensor::argmax(int64_t d, bool k) const { return ipuml::argmax(*this, d, k); }
IPUML_INLINE Tensor Tensor::exp() const { return ipuml::exp(*this); }
IPUML_INLINE Tensor Tensor::log() const { return ipuml::log(*this); }
IPUML_INLINE Tensor Tensor::sqrt() const { return ipuml::sqrt(*this); }
IPUML_INLINE Tensor Tensor::abs() const { return ipuml::abs(*this); }
IPUML_INLINE Tensor Tensor::relu() const { return ipuml::relu(*this); }
IPUML_INLINE Tensor Tensor::pow(double e) const { return ipuml::pow(*this, e); }
IPUML_INLINE Tensor Tensor::matmul(const Tensor& o) const { return ipuml::matmul(*this, o); }
IPUML_INLINE Tensor Tensor::add(const Tensor& o, double alpha) const {
  return ipuml::add(*this, o, alpha);
}
IPUML_INLINE Tensor Tensor::add(double s) const { return ipuml::add(*this, s); }
IPUML_INLINE Tensor Tensor::sub(const Tensor& o) const { return ipuml::sub(*this, o); }
IPUML_INLINE Tensor Tensor::sub(double s) const { return ipuml::sub(*this, s); }
IPUML_INLINE Tensor Tensor::mul(const Tensor& o) const { return ipuml::mul(*this, o); }
IPUML_INLINE Tensor Tensor::mul(double s) const { return ipuml::mul(*this, s); }
IPUML_INLINE Tensor Tensor::div(const Tensor& o) const { return ipuml::div(*this, o); }
IPUML_INLINE Tensor Tensor::div(double s) const { return ipuml::div(*this, s); }
IPUML_INLINE Tensor Tensor::neg() const { return ipuml::neg(*this); }
IPUML_INLINE Tensor Tensor::rsqrt() const { return ipuml::rsqrt(*this); }
IPUML_INLINE Tensor Tensor::tanh() const { return ipuml::tanh(*this); }
IPUML_INLINE Tensor Tensor::sigmoid() const { return ipuml::sigmoid(*this); }
IPUML_INLINE Tensor Tensor::clamp(std::optional<double> lo, std::optional<double> hi) const {
  return ipuml::clamp(*this, lo, hi);
}
IPUML_INLINE Tensor Tensor::eq(const Tensor& o) const { return ipuml::eq(*this, o); }
IPUML_INLINE Tensor Tensor::ne(const Tensor& o) const { return ipuml::ne(*this, o); }
IPUML_INLINE Tensor Tensor::lt(const Tensor& o) const { return ipuml::lt(*this, o); }
IPUML_INLINE Tensor Tensor::le(const Tensor& o) const { return ipuml::le(*this, o); }
IPUML_INLINE Tensor Tensor::gt(const Tensor& o) const { return ipuml::gt(*this, o); }
IPUML_INLINE Tensor Tensor::ge(const Tensor& o) const { return ipuml::ge(*this, o); }
IPUML_INLINE Tensor Tensor::eq(double s) const { return ipuml::eq(*this, s); }
IPUML_INLINE Tensor Tensor::ne(double s) const { return ipuml::ne(*this, s); }
IPUML_INLINE Tensor Tensor::lt(double s) const { return ipuml::lt(*this, s); }
IPUML_INLINE Tensor Tensor::le(double s) const { return ipuml::le(*this, s); }
IPUML_INLINE Tensor Tensor::gt(double s) const { return ipuml::gt(*this, s); }
IPUML_INLINE Tensor Tensor::ge(double s) const { return ipuml::ge(*this, s); }
IPUML_INLINE Tensor Tensor::amin(std::vector<int64_t> d, bool k) const {
  return ipuml::amin(*this, std::move(d), k);
}
IPUML_INLINE Tensor Tensor::argmin(int64_t d, bool k) const { return ipuml::argmin(*this, d, k); }
IPUML_INLINE std::pair<Tensor, Tensor> Tensor::max(int64_t d, bool k) const {
  return ipuml::max(*this, d, k);
}
IPUML_INLINE std::pair<Tensor, Tensor> Tensor::min(int64_t d, bool k) const {
  return ipuml::min(*this, d, k);
}
IPUML_INLINE Tensor Tensor::var(std::vector<int64_t> d, int64_t c, bool k) const {
  return ipuml::var(*this, std::move(d), c, k);
}
IPUML_INLINE Tensor Tensor::softmax(int64_t d) const { return ipuml::softmax(*this, d); }
IPUML_INLINE Tensor Tensor::log_softmax(int64_t d) const { return ipuml::log_softmax(*this, d); }
IPUML_INLINE Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  return ipuml::masked_fill(*this, mask, value);
}
IPUML_INLINE Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return ipuml::where(condition, *this, other);
}
IPUML_INLINE Tensor Tensor::triu(int64_t d) const { return ipuml::triu(*this, d); }
IPUML_INLINE Tensor Tensor::tril(int64_t d) const { return ipuml::tril(*this, d); }
IPUML_INLINE Tensor Tensor::bmm(const Tensor& o) const { return ipuml::bmm(*this, o); }
IPUML_INLINE Tensor Tensor::baddbmm(const Tensor& b1, const Tensor& b2, double beta,
                                    double alpha) const {
  return ipuml::baddbmm(*this, b1, b2, beta, alpha);
}
IPUML_INLINE Tensor Tensor::gather(int64_t d, const Tensor& index) const {
  return ipuml::gather(*this, d, index);
}
IPUML_INLINE Tensor Tensor::index_select(int64_t d, const Tensor& index) const {
  return ipuml::index_select(*this, d, index);
}
IPUML_INLINE std::vector<Tensor> Tensor::split(int64_t size, int64_t d) const {
  return ipuml::split(*this, size, d);
}
IPUML_INLINE std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  return ipuml::chunk(*this, chunks, d);
}

IPUML_INLINE Tensor& Tensor::add_(const Tensor& o, double alpha) {
  Tensor rhs = alpha == 1.0 ? o : ipuml::mul(o, alpha);
  detail::dispatch_into(*this, ir::OpKind::Add, {}, {*this, rhs});
  return *this;
}
IPUML_INLINE Tensor& Tensor::add_(double s) {
  detail::dispatch_into(*this, ir::OpKind::Add, {}, {*this, ops_detail::scalar_like(*this, s)});
  return *this;
}
IPUML_INLINE Tensor& Tensor::mul_(const Tensor& o) {
  detail::dispatch_into(*this, ir::OpKind::Mul, {}, {*this, o});
  return *this;
}
IPUML_INLINE Tensor& Tensor::mul_(double s) {
  detail::dispatch_into(*this, ir::OpKind::Mul, {}, {*this, ops_detail::scalar_like(*this, s)});
  return *this;
}
IPUML_INLINE Tensor& Tensor::div_(const Tensor& o) {
  detail::dispatch_into(*this, ir::OpKind::Div, {}, {*this, o});
  return *this;
}
IPUML_INLINE Tensor& Tensor::copy_(const Tensor& src) {
  Tensor s = src.dtype() == dtype() ? src : ipuml::cast(src, dtype());
  if (s.shape() != shape()) s = ipuml::expand(s, shape());
  detail::dispatch_into(*this, ir::OpKind::Copy, {}, {s});
  return *this;
}
IPUML_INLINE Tensor& Tensor::fill_(double v) {
  ir::Attrs a;
  a.shape = shape();
  a.scalar = v;
  a.dtype = dtype();
  detail::dispatch_into(*this, ir::OpKind::Full, a, {});
  return *this;
}

IPUML_INLINE std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  if (t.is_symbolic())
    return os << "tensor(<symbolic>, shape=" << shape_str(t.shape()) << ", dtype=" << t.dtype()
              << ")";
  if (t.is_meta())  // as PyTorch prints it
    return os << "tensor(..., device='meta', size=" << shape_str(t.shape())
              << ", dtype=" << t.dtype() << ")";
  const auto v = t.to_vector<double>();
  const Shape& s = t.shape();
  std::ostringstream out;
  out << "tensor(";
  const bool integral = is_integral(t.dtype()) || t.dtype() == kBool;
  auto print_value = [&](double x) {
    if (t.dtype() == kBool)
      out << (x != 0 ? "True" : "False");
    else if (integral)
      out << static_cast<int64_t>(x);
    else
      out << std::setprecision(4) << std::fixed << x;
  };
  const int64_t limit = 6;  // per dim, like PyTorch's summarisation
  std::function<void(size_t, int64_t)> rec = [&](size_t d, int64_t off) {
    if (d == s.size()) {
      print_value(v[static_cast<size_t>(off)]);
      return;
    }
    out << '[';
    const int64_t n = s[d];
    const int64_t stride = numel(Shape(s.begin() + static_cast<int64_t>(d) + 1, s.end()));
    for (int64_t i = 0; i < n; ++i) {
      if (n > limit && i == limit / 2) {
        out << "...";
        i = n - limit / 2 - 1;
        if (d + 1 < s.size())
          out << ",\n" << std::string(8 + d, ' ');
        else
          out << ", ";
        continue;
      }
      rec(d + 1, off + i * stride);
      if (i + 1 < n) {
        out << ',';
        if (d + 1 < s.size())
          out << '\n' << std::string(8 + d, ' ');
        else
          out << ' ';
      }
    }
    out << ']';
  };
  rec(0, 0);
  out << ", shape=" << shape_str(s) << ", dtype=" << t.dtype();
  if (t.requires_grad()) out << ", requires_grad=True";
  out << ')';
  return os << out.str();
}

}  // namespace ipuml
