// Elementwise ops and their backward formulas (written with the same ops).
#pragma once

#include <cmath>

#include <ipuml/tensor/ops_common_impl.hpp>

namespace ipuml {

namespace ops_detail {

inline Tensor binary(OpKind k, const Tensor& a, const Tensor& b) { return run1(k, {}, {a, b}); }

// A scalar operand in the dtype of `like`.
inline Tensor scalar_like(const Tensor& like, double v) {
  return scalar_tensor(v, like.dtype() == kBool ? kFloat32 : like.dtype());
}

inline Tensor unary_grad(const char* name, const Tensor& x, const Tensor& out,
                         autograd::BackwardFn fn) {
  attach({out}, name, {x}, std::move(fn));
  return out;
}

}  // namespace ops_detail

using namespace ops_detail;

IPUML_INLINE Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  if (alpha != 1.0) return add(a, mul(b, alpha));
  Tensor out = binary(OpKind::Add, a, b);
  attach({out}, "AddBackward", {a, b},
         [sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g) {
           return std::vector<Tensor>{sum_to(g[0], sa), sum_to(g[0], sb)};
         });
  return out;
}

IPUML_INLINE Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary(OpKind::Sub, a, b);
  attach({out}, "SubBackward", {a, b},
         [sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g) {
           return std::vector<Tensor>{sum_to(g[0], sa), sum_to(neg(g[0]), sb)};
         });
  return out;
}

IPUML_INLINE Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary(OpKind::Mul, a, b);
  attach({out}, "MulBackward", {a, b},
         [a = saved(a), b = saved(b), ra = a.requires_grad(),
          rb = b.requires_grad()](const std::vector<Tensor>& g) {
           return std::vector<Tensor>{ra ? sum_to(mul(g[0], b), a.shape()) : Tensor(),
                                      rb ? sum_to(mul(g[0], a), b.shape()) : Tensor()};
         });
  return out;
}

IPUML_INLINE Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary(OpKind::Div, a, b);
  attach({out}, "DivBackward", {a, b},
         [a = saved(a), b = saved(b), rb = b.requires_grad()](const std::vector<Tensor>& g) {
           Tensor ga = sum_to(div(g[0], b), a.shape());
           Tensor gb = rb ? sum_to(neg(div(mul(g[0], a), mul(b, b))), b.shape()) : Tensor();
           return std::vector<Tensor>{ga, gb};
         });
  return out;
}

IPUML_INLINE Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary(OpKind::Pow, a, b);
  attach({out}, "PowBackward", {a, b},
         [a = saved(a), b = saved(b), o = saved(out),
          rb = b.requires_grad()](const std::vector<Tensor>& g) {
           Tensor ga = sum_to(mul(g[0], mul(b, pow(a, sub(b, ones_like(b))))), a.shape());
           Tensor gb = rb ? sum_to(mul(g[0], mul(o, log(a))), b.shape()) : Tensor();
           return std::vector<Tensor>{ga, gb};
         });
  return out;
}

IPUML_INLINE Tensor pow(const Tensor& a, double exponent) {
  Attrs at;
  at.scalar = exponent;
  Tensor out = run1(OpKind::PowScalar, at, {a});
  return unary_grad("PowBackward", a, out, [a = saved(a), exponent](const std::vector<Tensor>& g) {
    if (exponent == 2.0) return std::vector<Tensor>{mul(g[0], mul(a, 2.0))};
    return std::vector<Tensor>{mul(g[0], mul(pow(a, exponent - 1.0), exponent))};
  });
}

IPUML_INLINE Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor out = binary(OpKind::Maximum, a, b);
  attach({out}, "MaximumBackward", {a, b},
         [a = saved(a), b = saved(b)](const std::vector<Tensor>& g) {
           // Ties split the gradient evenly, as PyTorch does.
           Tensor ma = add(cast(gt(a, b), g[0].dtype()), mul(cast(eq(a, b), g[0].dtype()), 0.5));
           Tensor mb = sub(ones_like(ma), ma);
           return std::vector<Tensor>{sum_to(mul(g[0], ma), a.shape()),
                                      sum_to(mul(g[0], mb), b.shape())};
         });
  return out;
}

IPUML_INLINE Tensor minimum(const Tensor& a, const Tensor& b) {
  Tensor out = binary(OpKind::Minimum, a, b);
  attach({out}, "MinimumBackward", {a, b},
         [a = saved(a), b = saved(b)](const std::vector<Tensor>& g) {
           Tensor ma = add(cast(lt(a, b), g[0].dtype()), mul(cast(eq(a, b), g[0].dtype()), 0.5));
           Tensor mb = sub(ones_like(ma), ma);
           return std::vector<Tensor>{sum_to(mul(g[0], ma), a.shape()),
                                      sum_to(mul(g[0], mb), b.shape())};
         });
  return out;
}

IPUML_INLINE Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
IPUML_INLINE Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
IPUML_INLINE Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
IPUML_INLINE Tensor div(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }

IPUML_INLINE Tensor neg(const Tensor& x) {
  return unary_grad("NegBackward", x, run1(OpKind::Neg, {}, {x}),
                    [](const std::vector<Tensor>& g) { return std::vector<Tensor>{neg(g[0])}; });
}
IPUML_INLINE Tensor exp(const Tensor& x) {
  Tensor out = run1(OpKind::Exp, {}, {x});
  return unary_grad("ExpBackward", x, out, [o = saved(out)](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{mul(g[0], o)};
  });
}
IPUML_INLINE Tensor log(const Tensor& x) {
  return unary_grad(
      "LogBackward", x, run1(OpKind::Log, {}, {x}),
      [x = saved(x)](const std::vector<Tensor>& g) { return std::vector<Tensor>{div(g[0], x)}; });
}
IPUML_INLINE Tensor sqrt(const Tensor& x) {
  Tensor out = run1(OpKind::Sqrt, {}, {x});
  return unary_grad("SqrtBackward", x, out, [o = saved(out)](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{div(g[0], mul(o, 2.0))};
  });
}
IPUML_INLINE Tensor rsqrt(const Tensor& x) {
  Tensor out = run1(OpKind::Rsqrt, {}, {x});
  return unary_grad("RsqrtBackward", x, out,
                    [x = saved(x), o = saved(out)](const std::vector<Tensor>& g) {
                      return std::vector<Tensor>{mul(g[0], mul(div(o, x), -0.5))};
                    });
}
IPUML_INLINE Tensor abs(const Tensor& x) {
  return unary_grad("AbsBackward", x, run1(OpKind::Abs, {}, {x}),
                    [x = saved(x)](const std::vector<Tensor>& g) {
                      return std::vector<Tensor>{mul(g[0], sign(x))};
                    });
}
IPUML_INLINE Tensor sign(const Tensor& x) { return run1(OpKind::Sign, {}, {x}); }
IPUML_INLINE Tensor tanh(const Tensor& x) {
  Tensor out = run1(OpKind::Tanh, {}, {x});
  return unary_grad("TanhBackward", x, out, [o = saved(out)](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{mul(g[0], sub(ones_like(o), mul(o, o)))};
  });
}
IPUML_INLINE Tensor sigmoid(const Tensor& x) {
  Tensor out = run1(OpKind::Sigmoid, {}, {x});
  return unary_grad("SigmoidBackward", x, out, [o = saved(out)](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{mul(g[0], mul(o, sub(ones_like(o), o)))};
  });
}
IPUML_INLINE Tensor relu(const Tensor& x) {
  Tensor out = run1(OpKind::Relu, {}, {x});
  return unary_grad("ReluBackward", x, out, [o = saved(out)](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{run1(OpKind::ReluGrad, {}, {g[0], o})};
  });
}
IPUML_INLINE Tensor gelu(const Tensor& x, const std::string& approximate) {
  IPUML_CHECK(approximate == "none" || approximate == "tanh",
              "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  Attrs a;
  a.mode = approximate == "tanh" ? 1 : 0;
  Tensor out = run1(OpKind::Gelu, a, {x});
  return unary_grad("GeluBackward", x, out, [x = saved(x), a](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{run1(OpKind::GeluGrad, a, {g[0], x})};
  });
}

IPUML_INLINE Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  if (min && max) IPUML_CHECK(*min <= *max, "clamp: min ", *min, " is greater than max ", *max);
  Attrs a;
  a.flag = min.has_value();
  a.flag2 = max.has_value();
  a.scalar = min.value_or(0.0);
  a.scalar2 = max.value_or(0.0);
  return unary_grad("ClampBackward", x, run1(OpKind::Clamp, a, {x}),
                    [x = saved(x), min, max](const std::vector<Tensor>& g) {
                      Tensor mask = ones_like(x);
                      if (min) mask = mul(mask, cast(ge(x, *min), x.dtype()));
                      if (max) mask = mul(mask, cast(le(x, scalar_like(x, *max)), x.dtype()));
                      return std::vector<Tensor>{mul(g[0], mask)};
                    });
}

IPUML_INLINE Tensor eq(const Tensor& a, const Tensor& b) { return binary(OpKind::Eq, a, b); }
IPUML_INLINE Tensor ne(const Tensor& a, const Tensor& b) { return binary(OpKind::Ne, a, b); }
IPUML_INLINE Tensor lt(const Tensor& a, const Tensor& b) { return binary(OpKind::Lt, a, b); }
IPUML_INLINE Tensor le(const Tensor& a, const Tensor& b) { return binary(OpKind::Le, a, b); }
IPUML_INLINE Tensor gt(const Tensor& a, const Tensor& b) { return binary(OpKind::Gt, a, b); }
IPUML_INLINE Tensor ge(const Tensor& a, const Tensor& b) { return binary(OpKind::Ge, a, b); }
IPUML_INLINE Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like(a, b)); }
IPUML_INLINE Tensor gt(const Tensor& a, double b) { return gt(a, scalar_like(a, b)); }
IPUML_INLINE Tensor lt(const Tensor& a, double b) { return lt(a, scalar_like(a, b)); }
IPUML_INLINE Tensor ge(const Tensor& a, double b) { return ge(a, scalar_like(a, b)); }
IPUML_INLINE Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like(a, b)); }
IPUML_INLINE Tensor le(const Tensor& a, double b) { return le(a, scalar_like(a, b)); }
IPUML_INLINE Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary(OpKind::LogicalAnd, a, b);
}

IPUML_INLINE Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out = run1(OpKind::Where, {}, {cond, a, b});
  attach({out}, "WhereBackward", {a, b},
         [c = saved(cond), sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g) {
           Tensor z = zeros_like(g[0]);
           return std::vector<Tensor>{sum_to(where(c, g[0], z), sa), sum_to(where(c, z, g[0]), sb)};
         });
  return out;
}

IPUML_INLINE Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  IPUML_CHECK(mask.dtype() == kBool, "masked_fill: mask must be bool, got ",
              dtype_name(mask.dtype()));
  Tensor out = run1(OpKind::Where, {}, {mask, scalar_like(x, value), x});
  IPUML_CHECK(out.shape() == x.shape(), "masked_fill: mask of shape ", shape_str(mask.shape()),
              " does not broadcast to the input's shape ", shape_str(x.shape()));
  attach({out}, "MaskedFillBackward", {x}, [m = saved(mask)](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{where(m, zeros_like(g[0]), g[0])};
  });
  return out;
}

IPUML_INLINE Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Attrs a;
  a.dtype = dtype;
  Tensor out = run1(OpKind::Cast, a, {x});
  if (is_floating(dtype) && is_floating(x.dtype()))
    attach({out}, "CastBackward", {x}, [from = x.dtype()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{cast(g[0], from)};
    });
  return out;
}

}  // namespace ipuml
