// Whether two state dicts hold the same keys, in the same order, with the same shapes, dtypes
// and bytes (what "a resumed run continues bit for bit" is checked with).
#pragma once

#include <cstring>

#include <ipuml/ipuml.hpp>

namespace ipuml::testing {

inline bool same_bits(const nn::StateDict& a, const nn::StateDict& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor x = a[i].second.contiguous(), y = b[i].second.contiguous();
    if (a[i].first != b[i].first || x.shape() != y.shape() || x.dtype() != y.dtype()) return false;
    const size_t n = static_cast<size_t>(x.numel()) * dtype_size(x.dtype());
    if (n && std::memcmp(x.raw_data(), y.raw_data(), n) != 0) return false;
  }
  return true;
}

}  // namespace ipuml::testing
