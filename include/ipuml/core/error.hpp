// ipuml::Error, the one exception type users catch, and the checks that throw it.
// Messages name the operation, the offending values and what was expected.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ipuml {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

template <typename T>
void stream_one(std::ostringstream& os, const T& v) {
  os << v;
}
template <typename T>
void stream_one(std::ostringstream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
}

// Concatenates its arguments with operator<<; vectors print as [a, b, c].
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (stream_one(os, args), ...);
  return os.str();
}

}  // namespace detail

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::str(args...));
}

}  // namespace ipuml

// IPUML_CHECK(cond, "op: message parts", ...) throws ipuml::Error when cond is false.
#define IPUML_CHECK(cond, ...)               \
  do {                                       \
    if (!(cond)) ::ipuml::fail(__VA_ARGS__); \
  } while (0)
