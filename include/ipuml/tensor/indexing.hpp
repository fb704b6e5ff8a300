// LibTorch's torch::indexing under ipuml::indexing: the index kinds Tensor::index and
// Tensor::index_put_ take (integers, Slice, None, Ellipsis, booleans and index/mask tensors).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>

#include <ipuml/core/error.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::indexing {

// `None` inserts a dimension of size 1 (NumPy's newaxis) and leaves a Slice bound open.
inline constexpr std::nullopt_t None = std::nullopt;

struct EllipsisIndexType {};
// `Ellipsis` (or the string "...") stands for as many full slices as the other indices leave.
inline constexpr EllipsisIndexType Ellipsis{};

// Python's start:stop:step. Open bounds (None) run to the ends; negative bounds count from the
// end; bounds past the ends clamp, as in Python. The step must be positive (as in PyTorch).
class Slice {
 public:
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start_(start), stop_(stop), step_(step.value_or(1)) {
    IPUML_CHECK(step_ > 0, "Slice: step must be positive (as in PyTorch), got ", step_);
  }
  const std::optional<int64_t>& start() const { return start_; }
  const std::optional<int64_t>& stop() const { return stop_; }
  int64_t step() const { return step_; }

 private:
  std::optional<int64_t> start_, stop_;
  int64_t step_;
};

class TensorIndex {
 public:
  enum class Kind { None, Ellipsis, Integer, Boolean, Slice, Tensor };

  TensorIndex(std::nullopt_t) : kind_(Kind::None) {}
  TensorIndex(EllipsisIndexType) : kind_(Kind::Ellipsis) {}
  TensorIndex(const char* s) : kind_(Kind::Ellipsis) {
    IPUML_CHECK(s != nullptr && std::strcmp(s, "...") == 0,
                "TensorIndex: the only string index is \"...\" (Ellipsis), got \"",
                s ? s : "(null)", "\"");
  }
  // Integers select (and drop) a dimension; `true`/`false` insert one of size 1/0.
  template <typename T>
  requires std::is_integral_v<T> TensorIndex(T v)
      : kind_(std::is_same_v<T, bool> ? Kind::Boolean : Kind::Integer),
        integer_(static_cast<int64_t>(v)) {}
  TensorIndex(Slice s) : kind_(Kind::Slice), slice_(std::move(s)) {}
  // An int64/int32 tensor picks positions along one dimension; a bool tensor is a mask over as
  // many dimensions as it has.
  TensorIndex(Tensor t) : kind_(Kind::Tensor), tensor_(std::move(t)) {
    IPUML_CHECK(tensor_.defined(), "TensorIndex: an undefined tensor is not an index");
  }

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_ellipsis() const { return kind_ == Kind::Ellipsis; }
  bool is_integer() const { return kind_ == Kind::Integer; }
  bool is_boolean() const { return kind_ == Kind::Boolean; }
  bool is_slice() const { return kind_ == Kind::Slice; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return integer_ != 0; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace ipuml::indexing
