// Attributes of one op instance (dims, shapes, conv geometry, scalars, seeds), in one plain
// struct so that graphs can be hashed, compared, serialised and cached.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <ipuml/core/dtype.hpp>
#include <ipuml/core/shape.hpp>

namespace ipuml::ir {

struct Attrs {
  std::vector<int64_t> dims;  // reduction dims, permutation, cat/softmax/gather dim at dims[0]
  Shape shape;  // target shape (reshape, expand, full, rand) or a restored input shape
  std::vector<int64_t> kernel, stride, padding, dilation;  // conv / pool geometry (2-d)
  int64_t groups = 1;
  int64_t start = 0, end = 0, step = 1;  // slice
  double scalar = 0, scalar2 = 0;  // full value, clamp bounds, pow exponent, arange start/step
  bool keepdim = false;
  bool flag = false,
       flag2 = false;  // matmul trans_a/trans_b; clamp has_min/has_max; count_include_pad
  int64_t mode = 0;    // gelu: 0 erf, 1 tanh
  DType dtype = DType::Float32;
  uint64_t seed = 0, stream = 0;  // random ops
  std::vector<double> reals;      // more scalars: adam_update's beta1, beta2, eps, weight decay;
                                  // sgd_update's momentum, dampening, weight decay

  // A stable text form, used for hashing graphs and in the profile report.
  std::string key() const {
    std::ostringstream os;
    auto vec = [&](const char* n, const std::vector<int64_t>& v) {
      if (v.empty()) return;
      os << n << '=';
      for (auto x : v) os << x << ',';
      os << ';';
    };
    vec("dims", dims);
    vec("shape", shape);
    vec("k", kernel);
    vec("s", stride);
    vec("p", padding);
    vec("d", dilation);
    os.precision(17);
    os << "g=" << groups << ";sl=" << start << ',' << end << ',' << step << ";sc=" << scalar << ','
       << scalar2 << ";f=" << keepdim << flag << flag2 << ";m=" << mode
       << ";t=" << dtype_name(dtype) << ";r=" << seed << ',' << stream;
    if (!reals.empty()) {  // absent from the keys of ops without them, which stay as they were
      os << ";re=";
      for (double x : reals) os << x << ',';
    }
    return os.str();
  }
  bool operator==(const Attrs& o) const { return key() == o.key(); }
};

}  // namespace ipuml::ir
