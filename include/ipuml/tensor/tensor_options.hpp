// TensorOptions: the dtype, device and requires_grad a factory gives a new tensor, with
// LibTorch's chaining setters: zeros({2, 3}, TensorOptions().dtype(kFloat32).device(kIPU)).
#pragma once

#include <optional>

#include <ipuml/core/device.hpp>
#include <ipuml/core/dtype.hpp>

namespace ipuml {

class TensorOptions {
 public:
  TensorOptions() = default;
  // Implicit, as in LibTorch, so that a dtype or a device alone can stand for the options.
  TensorOptions(DType d) : dtype_(d) {}                // NOLINT
  TensorOptions(Device d) : device_(d) {}              // NOLINT
  TensorOptions(DeviceType t) : device_(Device(t)) {}  // NOLINT

  TensorOptions dtype(DType d) const {
    TensorOptions o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool on) const {
    TensorOptions o = *this;
    o.requires_grad_ = on;
    return o;
  }

  DType dtype() const { return dtype_.value_or(kFloat32); }
  // The factory's own default where no dtype was set (int64 for randint and arange(end)).
  DType dtype_or(DType fallback) const { return dtype_.value_or(fallback); }
  bool has_dtype() const { return dtype_.has_value(); }
  // The thread's default device (the CPU unless a DefaultDeviceGuard is active) where none was set.
  Device device() const { return device_.value_or(default_device()); }
  bool has_device() const { return device_.has_value(); }
  bool requires_grad() const { return requires_grad_; }

 private:
  std::optional<DType> dtype_;
  std::optional<Device> device_;
  bool requires_grad_ = false;
};

}  // namespace ipuml
