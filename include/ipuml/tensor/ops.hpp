// The public op set, PyTorch-named: creation, elementwise, reductions, data movement, linear
// algebra, nn functional ops and losses. Every differentiable op records its backward.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/tensor/dispatch.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml {

// ---- creation -------------------------------------------------------------------------------
Tensor zeros(const Shape& shape, DType dtype = kFloat32);
Tensor ones(const Shape& shape, DType dtype = kFloat32);
Tensor full(const Shape& shape, double value, DType dtype = kFloat32);
Tensor scalar_tensor(double value, DType dtype = kFloat32);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor arange(int64_t end, DType dtype = kInt64);
Tensor arange(double start, double end, double step = 1.0, DType dtype = kFloat32);
// Random tensors from the default generator (or `gen`): counter-based, thread-count independent.
Tensor rand(const Shape& shape, Generator* gen = nullptr);
Tensor randn(const Shape& shape, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator* gen = nullptr);
Tensor uniform(const Shape& shape, double low, double high, Generator* gen = nullptr);
// The same with TensorOptions (dtype, device, requires_grad), as LibTorch spells them:
// zeros({2, 3}, TensorOptions().dtype(kFloat32).device(kIPU)), randn({4}, Device("ipu:1")).
Tensor zeros(const Shape& shape, const TensorOptions& options);
Tensor ones(const Shape& shape, const TensorOptions& options);
Tensor full(const Shape& shape, double value, const TensorOptions& options);
Tensor arange(int64_t end, const TensorOptions& options);
Tensor arange(double start, double end, const TensorOptions& options);
Tensor arange(double start, double end, double step, const TensorOptions& options);
Tensor rand(const Shape& shape, const TensorOptions& options, Generator* gen = nullptr);
Tensor randn(const Shape& shape, const TensorOptions& options, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& options,
               Generator* gen = nullptr);
// Copies host data into a new tensor.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape);
template <typename T>
Tensor from_blob(const T* data, const Shape& shape);
Tensor from_vector(const std::vector<float>& values, const Shape& shape, DType storage);

// ---- elementwise ----------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor cast(const Tensor& x, DType dtype);

// ---- reductions -----------------------------------------------------------------------------
// Empty dims reduce over everything. Negative dims count from the end.
Tensor sum(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
// torch.max(x, dim, keepdim): values and int64 indices.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, std::vector<int64_t> dims = {}, int64_t correction = 1,
           bool keepdim = false);
// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- data movement --------------------------------------------------------------------------
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor contiguous(const Tensor& x);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor embedding(const Tensor& weight, const Tensor& indices);

// ---- linear algebra -------------------------------------------------------------------------
// torch.matmul: 1-d operands are promoted and the added dim removed; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// x @ weight^T + bias (weight is [out, in]).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// torch.bmm: [B, n, m] @ [B, m, p] -> [B, n, p] (no broadcasting, as PyTorch).
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.baddbmm: beta * input + alpha * bmm(batch1, batch2); input broadcasts to the product's
// shape and is ignored when beta is 0 (its NaNs do not propagate, as in PyTorch).
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, double beta = 1.0,
               double alpha = 1.0);
// torch.einsum over letter subscripts ("bhqd,bhkd->bhqk", implicit output "ij,jk"), lowered to
// diagonal slices, sums, permutes, reshapes and batched matmuls (so it traces everywhere).
// Operands are contracted left to right; ellipses ('...') are refused.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
// torch.triu / torch.tril over the last two dims: elements below (triu) or above (tril) the
// `diagonal`-th diagonal become 0 (diagonal > 0 is above the main one).
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor tril(const Tensor& x, int64_t diagonal = 0);

// ---- nn functional --------------------------------------------------------------------------
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
              std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// torch.nn.functional.conv_transpose2d: the gradient of conv2d with respect to its input, as a
// layer. weight is [C_in, C_out / groups, kH, kW]; the output is [N, C_out, H_out, W_out] with
// H_out = (H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1. As in
// PyTorch, groups comes before dilation (conv2d has them the other way round), and
// output_padding (which only resolves which input size a strided conv2d came from) must be
// smaller than stride or than dilation.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
                        std::vector<int64_t> output_padding = {0, 0}, int64_t groups = 1,
                        std::vector<int64_t> dilation = {1, 1});
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0});
// LibTorch's max_pool2d(x, 2): one number for both dims.
inline Tensor max_pool2d(const Tensor& x, int64_t kernel) {
  return max_pool2d(x, std::vector<int64_t>{kernel, kernel});
}
Tensor max_pool1d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Inverted dropout; the mask comes from the counter-based generator.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);
// Updates running_mean/running_var in place when training (if they are defined).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
// act(batch_norm(x) + residual), act = ReLU when `relu`: one pass over x (the fused BatchNorm
// ops) for float32 inputs of rank >= 3 with weight and bias both given or both absent;
// otherwise the composite. `residual` may be undefined (nothing added).
Tensor batch_norm_act(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                      const Tensor& weight, const Tensor& bias, bool training, double momentum,
                      double eps, const Tensor& residual, bool relu);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// PyTorch 2's F.scaled_dot_product_attention: softmax(q k^T * scale + bias) v over [..., L, E]
// queries, [..., S, E] keys and [..., S, Ev] values (leading dims broadcast). attn_mask is bool
// (true = may attend) or float (added), broadcasting to [..., L, S]; is_causal masks keys after
// the query (then attn_mask must be undefined); scale defaults to 1/sqrt(E). dropout_p applies
// to the attention weights (always, as in PyTorch: pass 0 in evaluation).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    Generator* gen = nullptr);

// ---- optimizer updates ----------------------------------------------------------------------

// How an Adam update applies its weight decay: not at all, as L2 (grad += wd * param, as
// torch.optim.Adam) or decoupled (param *= 1 - lr * wd before the update, as torch.optim.AdamW).
enum class AdamDecay { None, L2, Decoupled };

struct AdamUpdateOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  AdamDecay decay = AdamDecay::L2;
};

// One Adam/AdamW step of torch.optim's single-tensor rule in one pass over memory, in place on
// param, exp_avg, exp_avg_sq and, when it is defined (AMSGrad), max_exp_avg_sq: float32 tensors
// of one shape on one device. `lr` and `step` are one-element float32 tensors read when the
// update runs (so a traced step follows a scheduler's lr); `step` must already count this update
// (t >= 1): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; vmax = max(vmax, v);
// param += -lr / (1 - b1^t) * m / (sqrt(v or vmax) / sqrt(1 - b2^t) + eps). The bias
// corrections are computed in double. No autograd: call it under NoGradGuard.
void adam_update_(Tensor& param, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                  const Tensor& grad, const Tensor& lr, const Tensor& step,
                  const AdamUpdateOptions& options);

struct SgdUpdateOptions {
  double momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
};

// One SGD step of torch.optim.SGD's single-tensor rule in one pass over memory, in place on param
// and, when momentum != 0, momentum_buffer (which must then be defined): float32 tensors of one
// shape on one device. `lr` is a one-element float32 tensor read when the update runs;
// g = grad + wd * param; buf = momentum * buf + (1 - dampening) * g; g = nesterov ?
// g + momentum * buf : buf; param += -lr * g. When `step` is defined (a one-element float32
// tensor already counting this update) the first step (step == 1) sets buf = g, as torch's
// lazily created buffer; without it the buffer must start at zero, which gives g as well. No
// autograd: call it under NoGradGuard.
void sgd_update_(Tensor& param, Tensor& momentum_buffer, const Tensor& grad, const Tensor& lr,
                 const Tensor& step, const SgdUpdateOptions& options);

// ---- losses ---------------------------------------------------------------------------------
enum class Reduction { None, Mean, Sum };
Reduction reduction_from_name(const std::string& name);
// PyTorch's semantics: targets equal to ignore_index contribute nothing; `weight` ([C]) scales
// each class; Mean divides by the summed weights of the targets not ignored (NaN if none);
// label smoothing mixes in the (weighted) mean over classes as PyTorch 1.13 does.
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     Reduction reduction = Reduction::Mean, double label_smoothing = 0.0,
                     const Tensor& weight = Tensor(), int64_t ignore_index = -100);
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                Reduction reduction = Reduction::Mean, const Tensor& weight = Tensor(),
                int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// LibTorch's argument order (weight before reduction): nll_loss(y, t, /*weight=*/{}, kSum).
inline Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight,
                       Reduction reduction = Reduction::Mean, int64_t ignore_index = -100) {
  return nll_loss(log_probs, target, reduction, weight, ignore_index);
}
inline Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight,
                            Reduction reduction = Reduction::Mean, int64_t ignore_index = -100,
                            double label_smoothing = 0.0) {
  return cross_entropy(logits, target, reduction, label_smoothing, weight, ignore_index);
}

// ---- operators ------------------------------------------------------------------------------
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return add(neg(b), a); }
inline Tensor operator/(double a, const Tensor& b) { return div(full_like(b, a), b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
// Comparisons give bool tensors (masks), as in LibTorch: `x.index({x > 0})`.
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, double b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, double b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, double b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, double b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, double b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, double b) { return ge(a, b); }

// ---- templates ------------------------------------------------------------------------------
template <typename T>
Tensor from_blob(const T* data, const Shape& shape) {
  Tensor t = empty(shape, dtype_of<T>());
  if (t.numel() > 0) std::memcpy(t.raw_data(), data, static_cast<size_t>(t.numel()) * sizeof(T));
  return t;
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  IPUML_CHECK(static_cast<int64_t>(values.size()) == numel(shape), "from_vector: ", values.size(),
              " values do not fill shape ", shape_str(shape), " (", numel(shape), " elements)");
  if constexpr (std::is_same_v<T, bool>) {
    Tensor t = empty(shape, kBool);
    auto* p = static_cast<uint8_t*>(t.raw_data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i] ? 1 : 0;
    return t;
  } else {
    return from_blob(values.data(), shape);
  }
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  require_data("to_vector");
  Tensor c = contiguous();
  const int64_t n = c.numel();
  std::vector<T> out(static_cast<size_t>(n));
  const void* p = c.raw_data();
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    switch (c.dtype()) {
      case DType::Float32:
        v = static_cast<const float*>(p)[i];
        break;
      case DType::Float16:
        v = half_bits_to_float(static_cast<const uint16_t*>(p)[i]);
        break;
      case DType::BFloat16:
        v = bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
        break;
      case DType::Int32:
        v = static_cast<const int32_t*>(p)[i];
        break;
      case DType::Int64:
        if constexpr (std::is_integral_v<T>) {
          out[static_cast<size_t>(i)] = static_cast<T>(static_cast<const int64_t*>(p)[i]);
          continue;
        }
        v = static_cast<double>(static_cast<const int64_t*>(p)[i]);
        break;
      case DType::Bool:
        v = static_cast<const uint8_t*>(p)[i];
        break;
    }
    out[static_cast<size_t>(i)] = static_cast<T>(v);
  }
  return out;
}

}  // namespace ipuml

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/tensor/ops_impl.hpp>
#endif
