// Bodies of F::rotary_embedding (rotary_embedding.hpp).
// Header-only mode includes this from rotary_embedding.hpp; compiled mode compiles it in src/lib.
#pragma once

#include <cmath>
#include <vector>

#include <ipuml/nn/rotary_embedding.hpp>
#include <ipuml/tensor/ops.hpp>

namespace ipuml::nn::functional {

namespace rotary_detail {

struct Tables {
  std::vector<float> cos, sin;  // [positions, rotary_dim], row-major
};

// The angles in double (as GPT-J's own numpy code; HF's float32 tables drift by up to
// position * 2^-24 rad), each cos and sin rounded once to float32. Column c of the table holds
// angle c / 2 (interleaved pairs) or angle c mod r/2 (halves).
inline Tables tables(const std::vector<int64_t>& positions, int64_t r, double base,
                     RotaryStyle style) {
  const int64_t half = r / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j)
    inv[static_cast<size_t>(j)] =
        1.0 / std::pow(base, static_cast<double>(2 * j) / static_cast<double>(r));
  Tables t;
  const auto n = static_cast<int64_t>(positions.size());
  t.cos.resize(static_cast<size_t>(n * r));
  t.sin.resize(t.cos.size());
  for (int64_t p = 0; p < n; ++p) {
    const double pos = static_cast<double>(positions[static_cast<size_t>(p)]);
    for (int64_t c = 0; c < r; ++c) {
      const int64_t j = style == RotaryStyle::Interleaved ? c / 2 : c % half;
      const double angle = pos * inv[static_cast<size_t>(j)];
      const size_t i = static_cast<size_t>(p * r + c);
      t.cos[i] = static_cast<float>(std::cos(angle));
      t.sin[i] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

}  // namespace rotary_detail

IPUML_INLINE Tensor rotary_embedding(const Tensor& x, const RotaryEmbeddingFuncOptions& o) {
  const char* op = "rotary_embedding";
  IPUML_CHECK(x.defined(), op, ": the input is an undefined tensor");
  IPUML_CHECK(is_floating(x.dtype()), op, ": expected a floating-point input, got ",
              dtype_name(x.dtype()));
  IPUML_CHECK(x.dim() >= 2, op,
              ": expected an input with a sequence dim and a feature (last) dim, such as [batch, "
              "seq, heads, head_dim], got shape ",
              shape_str(x.shape()));
  const int64_t rank = x.dim(), last = rank - 1;
  int64_t seq = o.seq_dim();
  IPUML_CHECK(seq >= -rank && seq < rank, op, ": seq_dim=", seq,
              " is out of range for an input of shape ", shape_str(x.shape()));
  if (seq < 0) seq += rank;
  IPUML_CHECK(seq != last, op, ": seq_dim=", o.seq_dim(),
              " is the feature dim (the last one) of an input of shape ", shape_str(x.shape()));
  const int64_t d = x.size(last);
  const int64_t r = o.rotary_dim().value_or(d);
  IPUML_CHECK(r > 0 && r % 2 == 0 && r <= d, op,
              ": rotary_dim must be even, positive and at most head_dim=", d, ", got ", r,
              " for an input of shape ", shape_str(x.shape()));
  IPUML_CHECK(o.offset() >= 0, op, ": offset must be non-negative, got ", o.offset());
  IPUML_CHECK(std::isfinite(o.base()) && o.base() > 0, op, ": base must be positive, got ",
              o.base());
  const int64_t positions = x.size(seq);
  Shape table_shape(static_cast<size_t>(rank), 1);
  table_shape[static_cast<size_t>(seq)] = positions;
  table_shape[static_cast<size_t>(last)] = r;
  std::vector<int64_t> pos;
  if (const Tensor& ids = o.position_ids(); ids.defined()) {
    IPUML_CHECK(o.offset() == 0, op, ": give position_ids or offset, not both (offset=", o.offset(),
                ")");
    IPUML_CHECK(!ids.is_symbolic() && !ids.is_meta(), op,
                ": position_ids must hold values (the tables are made on the host); a traced "
                "program takes its positions through offset");
    IPUML_CHECK(ids.dtype() == kInt64, op, ": position_ids must be int64, got ",
                dtype_name(ids.dtype()));
    const bool batched = ids.dim() == 2;
    IPUML_CHECK((ids.dim() == 1 || (batched && seq != 0 && ids.size(0) == x.size(0))) &&
                    ids.size(ids.dim() - 1) == positions,
                op, ": position_ids must be [seq] or [batch, seq] = [", x.size(0), ", ", positions,
                "] for an input of shape ", shape_str(x.shape()), ", got shape ",
                shape_str(ids.shape()));
    pos = ids.to_vector<int64_t>();
    for (int64_t p : pos) IPUML_CHECK(p >= 0, op, ": position_ids must be non-negative, got ", p);
    if (batched) table_shape[0] = x.size(0);
  } else {
    for (int64_t p = 0; p < positions; ++p) pos.push_back(o.offset() + p);
  }
  if (x.numel() == 0) return x;

  const auto t = rotary_detail::tables(pos, r, o.base(), o.style());
  // Rounded to x's dtype once, as constants; they go where x is (a traced x captures them).
  Tensor cos = from_vector(t.cos, table_shape, x.dtype());
  Tensor sin = from_vector(t.sin, table_shape, x.dtype());
  if (!x.is_symbolic() && !x.device().is_cpu()) {
    cos = cos.to(x.device());
    sin = sin.to(x.device());
  }

  const Tensor xr = r < d ? slice(x, last, 0, r) : x;
  Tensor rotated;
  if (o.style() == RotaryStyle::Interleaved) {
    // (x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...)
    const Tensor even = slice(xr, last, 0, r, 2), odd = slice(xr, last, 1, r, 2);
    rotated = reshape(stack({neg(odd), even}, rank), xr.shape());
  } else {
    // (a, b) halves -> (-b, a)
    rotated = cat({neg(slice(xr, last, r / 2, r)), slice(xr, last, 0, r / 2)}, last);
  }
  const Tensor out = add(mul(xr, cos), mul(rotated, sin));
  return r < d ? cat({out, slice(x, last, r, d)}, last) : out;
}

}  // namespace ipuml::nn::functional
