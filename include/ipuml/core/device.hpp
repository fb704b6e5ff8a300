// Device: where a tensor's storage lives and whose eager kernel table runs its ops ("cpu",
// "ipu:1"). Backends registered later add their own device types by name.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <ipuml/core/error.hpp>

namespace ipuml {

// The kinds of device. CPU and IPU are built in; a backend added later gets the next free
// value from register_device_type("name") (LibTorch's PrivateUse1, without a fixed slot).
// CUDA is a name only, so that LibTorch code choosing its device with cuda::is_available()
// compiles: no backend serves it, and a tensor moved there is refused with an ipuml::Error.
// Meta is PyTorch's meta device: a tensor there has a shape and a dtype but no values and no
// memory, and ops on it only infer their results' shapes. A model built on it can be traced,
// compiled and sized (a compile-only estimate) at any parameter count; reading its values is
// refused.
enum class DeviceType : int8_t { CPU = 0, IPU = 1, CUDA = 2, Meta = 3 };
inline constexpr DeviceType kCPU = DeviceType::CPU;
inline constexpr DeviceType kIPU = DeviceType::IPU;
inline constexpr DeviceType kCUDA = DeviceType::CUDA;
inline constexpr DeviceType kMeta = DeviceType::Meta;
inline constexpr int kMaxDeviceTypes = 16;

namespace detail {
struct DeviceTypeNames {
  std::mutex mu;
  std::vector<std::string> names{"cpu", "ipu", "cuda", "meta"};
};
inline DeviceTypeNames& device_type_names() {
  static DeviceTypeNames* n = new DeviceTypeNames();  // never destroyed: used by static dtors
  return *n;
}
}  // namespace detail

// The device type called `name`, made on first use (lower-case letters, digits, '_').
inline DeviceType register_device_type(const std::string& name) {
  IPUML_CHECK(!name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") ==
                                   std::string::npos,
              "register_device_type: invalid name '", name,
              "' (expected lower-case letters, digits and '_')");
  auto& reg = detail::device_type_names();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (size_t i = 0; i < reg.names.size(); ++i)
    if (reg.names[i] == name) return static_cast<DeviceType>(i);
  IPUML_CHECK(reg.names.size() < static_cast<size_t>(kMaxDeviceTypes),
              "register_device_type: no room for device type '", name, "' (at most ",
              kMaxDeviceTypes, " types)");
  reg.names.push_back(name);
  return static_cast<DeviceType>(reg.names.size() - 1);
}

inline std::optional<DeviceType> find_device_type(const std::string& name) {
  auto& reg = detail::device_type_names();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (size_t i = 0; i < reg.names.size(); ++i)
    if (reg.names[i] == name) return static_cast<DeviceType>(i);
  return std::nullopt;
}

inline std::string device_type_name(DeviceType t) {
  auto& reg = detail::device_type_names();
  std::lock_guard<std::mutex> lock(reg.mu);
  const auto i = static_cast<size_t>(t);
  return i < reg.names.size() ? reg.names[i] : "device_type_" + std::to_string(i);
}

inline std::vector<std::string> device_type_names() {
  auto& reg = detail::device_type_names();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.names;
}

// A device type and an index ("ipu:1"); the CPU has the one index 0.
class Device {
 public:
  Device() = default;
  Device(DeviceType type, int index = 0) : type_(type), index_(index) {  // NOLINT: implicit
    IPUML_CHECK(index >= 0, "Device: index must be >= 0, got ", index, " for ",
                device_type_name(type));
    IPUML_CHECK(type != kCPU || index == 0, "Device: the cpu has one device (index 0), got ",
                index);
    IPUML_CHECK(type != kMeta || index == 0, "Device: the meta device has one index (0), got ",
                index);
  }
  // Parses "cpu", "ipu", "ipu:1", or a registered type's name with an optional index.
  Device(const std::string& s) : Device(parse(s)) {}  // NOLINT: implicit, as in LibTorch
  Device(const char* s) : Device(parse(s)) {}         // NOLINT: implicit, as in LibTorch

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool is_cpu() const { return type_ == kCPU; }
  bool is_ipu() const { return type_ == kIPU; }
  bool is_meta() const { return type_ == kMeta; }
  std::string str() const {
    return is_cpu() || is_meta() ? device_type_name(type_)
                                 : device_type_name(type_) + ":" + std::to_string(index_);
  }
  bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  bool operator!=(const Device& o) const { return !(*this == o); }

 private:
  static Device parse(const std::string& s) {
    const auto colon = s.find(':');
    const std::string name = s.substr(0, colon);
    const auto type = find_device_type(name);
    if (!type) {
      std::string known;
      for (auto& n : device_type_names()) known += (known.empty() ? "" : ", ") + n;
      fail("Device: unknown device type '", name, "' in \"", s, "\"; expected one of ", known,
           ", optionally followed by ':index'");
    }
    if (colon == std::string::npos) return Device(*type, 0);
    const std::string idx = s.substr(colon + 1);
    IPUML_CHECK(
        !idx.empty() && idx.size() <= 6 && idx.find_first_not_of("0123456789") == std::string::npos,
        "Device: expected a non-negative index after ':' in \"", s, "\"");
    return Device(*type, std::stoi(idx));
  }

  DeviceType type_ = kCPU;
  int index_ = 0;
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

namespace detail {
inline Device& default_device_slot() {
  thread_local Device d;
  return d;
}
}  // namespace detail

// The device that factories without a device of their own (zeros(shape), randn(shape),
// empty(shape), and so the parameters a module makes) create tensors on, on this thread: the
// CPU unless a DefaultDeviceGuard says otherwise (PyTorch's `with torch.device("meta"):`).
inline Device default_device() { return detail::default_device_slot(); }

// Makes `device` the default device on this thread for the guard's lifetime, e.g.
//   { ipuml::DefaultDeviceGuard meta(ipuml::kMeta); auto model = GPTJ(GPTJConfig::gptj_6b()); }
// builds a 6-billion-parameter model without allocating its parameters.
class DefaultDeviceGuard {
 public:
  explicit DefaultDeviceGuard(Device device) : previous_(detail::default_device_slot()) {
    detail::default_device_slot() = device;
  }
  ~DefaultDeviceGuard() { detail::default_device_slot() = previous_; }
  DefaultDeviceGuard(const DefaultDeviceGuard&) = delete;
  DefaultDeviceGuard& operator=(const DefaultDeviceGuard&) = delete;

 private:
  Device previous_;
};

// LibTorch's torch::cuda::is_available() / device_count(): ipuml has no CUDA backend.
namespace cuda {
inline bool is_available() { return false; }
inline int64_t device_count() { return 0; }
}  // namespace cuda
inline std::ostream& operator<<(std::ostream& os, DeviceType t) {
  return os << device_type_name(t);
}

}  // namespace ipuml

template <>
struct std::hash<ipuml::Device> {
  size_t operator()(const ipuml::Device& d) const noexcept {
    return std::hash<int64_t>{}(static_cast<int64_t>(d.type()) << 32 | d.index());
  }
};
