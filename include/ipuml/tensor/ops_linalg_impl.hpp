// Batched products (bmm, baddbmm), einsum lowered to primitive ops, and triu/tril.
#pragma once

#include <algorithm>
#include <map>

#include <ipuml/tensor/ops_common_impl.hpp>

namespace ipuml {

IPUML_INLINE Tensor bmm(const Tensor& a, const Tensor& b) {
  IPUML_CHECK(a.dim() == 3, "bmm: batch1 must be a 3-d tensor [B, n, m], got shape ",
              shape_str(a.shape()));
  IPUML_CHECK(b.dim() == 3, "bmm: batch2 must be a 3-d tensor [B, m, p], got shape ",
              shape_str(b.shape()));
  IPUML_CHECK(a.shape()[0] == b.shape()[0], "bmm: batch1 of shape ", shape_str(a.shape()),
              " and batch2 of shape ", shape_str(b.shape()),
              " differ in batch size (expected equal first dims, bmm does not broadcast)");
  IPUML_CHECK(a.shape()[2] == b.shape()[1], "bmm: cannot multiply batch1 of shape ",
              shape_str(a.shape()), " by batch2 of shape ", shape_str(b.shape()), " (inner dims ",
              a.shape()[2], " and ", b.shape()[1], " differ)");
  IPUML_CHECK(a.dtype() == b.dtype(), "bmm: batch1 is ", dtype_name(a.dtype()), " but batch2 is ",
              dtype_name(b.dtype()), " (expected the same dtype)");
  return ops_detail::matmul_raw(a, b, false, false);
}

IPUML_INLINE Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2,
                            double beta, double alpha) {
  IPUML_CHECK(input.defined(), "baddbmm: input is undefined");
  Tensor prod = bmm(batch1, batch2);
  const Shape& ps = prod.shape();
  bool fits = input.dim() <= 3;
  for (int64_t i = 0; fits && i < input.dim(); ++i) {
    const int64_t d = input.shape()[static_cast<size_t>(i)];
    fits = d == 1 || d == ps[static_cast<size_t>(3 - input.dim() + i)];
  }
  IPUML_CHECK(fits, "baddbmm: input of shape ", shape_str(input.shape()),
              " does not broadcast to the product's shape ", shape_str(ps));
  IPUML_CHECK(input.dtype() == prod.dtype(), "baddbmm: input is ", dtype_name(input.dtype()),
              " but the batches are ", dtype_name(prod.dtype()), " (expected the same dtype)");
  if (alpha != 1.0) prod = mul(prod, alpha);
  if (beta == 0.0) return prod;
  return add(beta == 1.0 ? input : mul(input, beta), prod);
}

namespace ops_detail {

// Zeroes the elements of the last two dims outside the band kept by triu (upper) or tril.
inline Tensor band(const Tensor& x, int64_t diagonal, bool upper, const char* op) {
  IPUML_CHECK(x.dim() >= 2, op, ": expected a tensor with at least 2 dims, got shape ",
              shape_str(x.shape()));
  const int64_t n = x.shape()[static_cast<size_t>(x.dim() - 2)];
  const int64_t m = x.shape().back();
  // col - row, compared with the diagonal: built from aranges so that it traces as ops.
  Tensor offset =
      sub(reshape(arange(m, x.device()), {1, m}), reshape(arange(n, x.device()), {n, 1}));
  Tensor drop =
      upper ? lt(offset, static_cast<double>(diagonal)) : gt(offset, static_cast<double>(diagonal));
  return masked_fill(x, drop, 0.0);
}

struct EinsumTerm {
  Tensor t;
  std::string idx;  // one letter per dim
};

inline bool has_letter(const std::string& s, char c) { return s.find(c) != std::string::npos; }

// Sums the dims of `term` whose letters are not in `keep`.
inline EinsumTerm einsum_sum_out(EinsumTerm term, const std::string& keep) {
  std::vector<int64_t> dims;
  std::string rest;
  for (size_t i = 0; i < term.idx.size(); ++i) {
    if (has_letter(keep, term.idx[i]))
      rest += term.idx[i];
    else
      dims.push_back(static_cast<int64_t>(i));
  }
  if (dims.empty()) return term;
  return {sum(term.t, dims), rest};
}

// Permutes `term` so that its letters read `order` (a permutation of them).
inline Tensor einsum_permute(const EinsumTerm& term, const std::string& order) {
  if (order == term.idx) return term.t;
  std::vector<int64_t> dims;
  for (char c : order) dims.push_back(static_cast<int64_t>(term.idx.find(c)));
  return permute(term.t, dims);
}

// Takes the diagonal of every letter repeated within one operand ("ii->i").
inline EinsumTerm einsum_diagonals(EinsumTerm term) {
  for (;;) {
    size_t p = std::string::npos, q = std::string::npos;
    for (size_t i = 0; i < term.idx.size() && p == std::string::npos; ++i)
      for (size_t j = i + 1; j < term.idx.size(); ++j)
        if (term.idx[i] == term.idx[j]) {
          p = i;
          q = j;
          break;
        }
    if (p == std::string::npos) return term;
    const char c = term.idx[p];
    const int64_t n = term.t.shape()[p];
    std::vector<int64_t> dims;
    std::string rest;
    Shape lead;
    for (size_t i = 0; i < term.idx.size(); ++i)
      if (i != p && i != q) {
        dims.push_back(static_cast<int64_t>(i));
        rest += term.idx[i];
        lead.push_back(term.t.shape()[i]);
      }
    dims.push_back(static_cast<int64_t>(p));
    dims.push_back(static_cast<int64_t>(q));
    Shape flat = lead;
    flat.push_back(n * n);
    // The diagonal of an n x n block is every (n+1)-th element of its flattened form.
    Tensor d = slice(reshape(permute(term.t, dims), flat), -1, 0, n * n, n + 1);
    term = {d, rest + c};
  }
}

// Contracts two operands with one batched matmul; the result keeps the letters in `keep`.
inline EinsumTerm einsum_contract(const EinsumTerm& a, const EinsumTerm& b,
                                  const std::string& keep) {
  std::string batch, left, right, inner;
  for (char c : a.idx) {
    if (!has_letter(b.idx, c))
      left += c;
    else if (has_letter(keep, c))
      batch += c;
    else
      inner += c;
  }
  for (char c : b.idx)
    if (!has_letter(a.idx, c)) right += c;
  auto size_of = [&](char c) {
    const size_t i = a.idx.find(c);
    return i != std::string::npos ? a.t.shape()[i] : b.t.shape()[b.idx.find(c)];
  };
  auto prod = [&](const std::string& s) {
    int64_t n = 1;
    for (char c : s) n *= size_of(c);
    return n;
  };
  const int64_t nb = prod(batch), m = prod(left), k = prod(inner), n = prod(right);
  auto shaped = [&](const Shape& mat) {
    Shape s = mat;
    if (!batch.empty()) s.insert(s.begin(), nb);
    return s;
  };
  // Each operand is used in its stored order when that is one of the two matmul layouts.
  const bool ta = a.idx == batch + inner + left && a.idx != batch + left + inner;
  const bool tb = b.idx == batch + right + inner && b.idx != batch + inner + right;
  Tensor ma = einsum_permute(a, ta ? batch + inner + left : batch + left + inner);
  Tensor mb = einsum_permute(b, tb ? batch + right + inner : batch + inner + right);
  ma = reshape(ma, shaped(ta ? Shape{k, m} : Shape{m, k}));
  mb = reshape(mb, shaped(tb ? Shape{n, k} : Shape{k, n}));
  Tensor r = matmul_raw(ma, mb, ta, tb);
  Shape out;
  for (char c : batch + left + right) out.push_back(size_of(c));
  return {reshape(r, out), batch + left + right};
}

}  // namespace ops_detail

IPUML_INLINE Tensor triu(const Tensor& x, int64_t diagonal) {
  return ops_detail::band(x, diagonal, true, "triu");
}

IPUML_INLINE Tensor tril(const Tensor& x, int64_t diagonal) {
  return ops_detail::band(x, diagonal, false, "tril");
}

IPUML_INLINE Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  using ops_detail::EinsumTerm;
  const std::string& eq = equation;
  std::string spec;
  for (char c : eq)
    if (c != ' ') spec += c;
  IPUML_CHECK(spec.find("...") == std::string::npos, "einsum: equation '", eq,
              "' uses an ellipsis ('...'), which ipuml does not support; name every dim");
  const size_t arrow = spec.find("->");
  const std::string lhs = spec.substr(0, arrow);
  const bool explicit_out = arrow != std::string::npos;
  std::string out = explicit_out ? spec.substr(arrow + 2) : "";
  std::vector<std::string> terms(1);
  for (char c : lhs) {
    if (c == ',') {
      terms.emplace_back();
      continue;
    }
    IPUML_CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'), "einsum: equation '", eq,
                "' has the character '", c,
                "' in its operands (expected letters, ',' and one '->')");
    terms.back() += c;
  }
  for (char c : out)
    IPUML_CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'), "einsum: equation '", eq,
                "' has the character '", c, "' in its output (expected letters)");
  IPUML_CHECK(!operands.empty(), "einsum: equation '", eq, "' got no operands");
  IPUML_CHECK(terms.size() == operands.size(), "einsum: equation '", eq, "' names ", terms.size(),
              " operands but ", operands.size(), " tensors were given");
  std::map<char, int64_t> size;
  std::map<char, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Tensor& t = operands[i];
    IPUML_CHECK(t.defined(), "einsum: operand ", i, " of '", eq, "' is undefined");
    IPUML_CHECK(static_cast<int64_t>(terms[i].size()) == t.dim(), "einsum: equation '", eq,
                "' gives operand ", i, " the ", terms[i].size(), " subscripts '", terms[i],
                "' but it has shape ", shape_str(t.shape()));
    IPUML_CHECK(t.dtype() == operands[0].dtype(), "einsum: operand ", i, " of '", eq, "' is ",
                dtype_name(t.dtype()), " but operand 0 is ", dtype_name(operands[0].dtype()));
    for (size_t j = 0; j < terms[i].size(); ++j) {
      const char c = terms[i][j];
      const int64_t s = t.shape()[j];
      auto [it, fresh] = size.emplace(c, s);
      IPUML_CHECK(fresh || it->second == s, "einsum: subscript '", c, "' of equation '", eq,
                  "' has size ", it->second, " in one place and ", s, " in operand ", i,
                  " of shape ", shape_str(t.shape()));
      ++count[c];
    }
  }
  if (!explicit_out)
    for (auto& [c, n] : count)
      if (n == 1) out += c;  // std::map orders 'A'-'Z' before 'a'-'z', as PyTorch does
  for (size_t i = 0; i < out.size(); ++i) {
    IPUML_CHECK(size.count(out[i]), "einsum: output subscript '", out[i], "' of equation '", eq,
                "' appears in no operand");
    IPUML_CHECK(out.find(out[i], i + 1) == std::string::npos, "einsum: output subscript '", out[i],
                "' of equation '", eq, "' appears more than once");
  }
  auto later = [&](size_t from) {
    std::string s = out;
    for (size_t i = from; i < terms.size(); ++i) s += terms[i];
    return s;
  };
  EinsumTerm acc = ops_detail::einsum_diagonals({operands[0], terms[0]});
  acc = ops_detail::einsum_sum_out(acc, later(1));
  for (size_t i = 1; i < terms.size(); ++i) {
    EinsumTerm b = ops_detail::einsum_diagonals({operands[i], terms[i]});
    b = ops_detail::einsum_sum_out(b, later(i + 1) + acc.idx);
    acc = ops_detail::einsum_contract(acc, b, later(i + 1));
  }
  acc = ops_detail::einsum_sum_out(acc, out);
  Tensor r = ops_detail::einsum_permute(acc, out);
  return r;
}

}  // namespace ipuml
