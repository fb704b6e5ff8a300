// The fields of a target preset as one table (name, parse-and-assign, JSON value), so that every
// target's text overrides ("clock_hz=1.85e9"), JSON form and field list come from one place.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <ipuml/core/error.hpp>

namespace ipuml::emu::fields {

template <typename T>
struct Field {
  const char* name;
  std::function<void(T&, const std::string&)> set;  // parses and assigns
  std::function<nlohmann::json(const T&)> get;
};

inline int64_t parse_int(const std::string& field, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);  // accepts 1e3 as well as 1000
  IPUML_CHECK(!v.empty() && end && *end == '\0' && errno == 0 && std::isfinite(d) &&
                  d == std::floor(d) && std::fabs(d) < 9.0e15,
              "target override: ", field, " expects an integer, got '", v, "'");
  return static_cast<int64_t>(d);
}

inline double parse_double(const std::string& field, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  IPUML_CHECK(!v.empty() && end && *end == '\0' && errno == 0 && std::isfinite(d),
              "target override: ", field, " expects a number, got '", v, "'");
  return d;
}

// Target names appear in JSON, reports and file names: a short plain-ASCII word.
inline bool valid_name(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// `s` with bytes outside printable ASCII as \xNN, for messages.
inline std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return s.size() > 80 ? out + "..." : out;
}

// Table rows for an integer or a floating-point member `n` of target type T.
#define IPUML_TARGET_FIELD_INT(T, n)                                                    \
  {                                                                                     \
#n, [](T& t, const std::string& s) { t.n = ::ipuml::emu::fields::parse_int(#n, s); }, \
   [](const T& t) { return nlohmann::json(t.n); } \
  }
#define IPUML_TARGET_FIELD_DBL(T, n)                                                       \
  {                                                                                        \
#n, [](T& t, const std::string& s) { t.n = ::ipuml::emu::fields::parse_double(#n, s); }, \
   [](const T& t) { return nlohmann::json(t.n); } \
  }

// The "name" field every target has.
template <typename T>
Field<T> name_field() {
  return {"name",
          [](T& t, const std::string& s) {
            IPUML_CHECK(valid_name(s),
                        "target override: name must be 1 to 64 letters, "
                        "digits or '_', '-', '.', got '",
                        printable(s), "'");
            t.name = s;
          },
          [](const T& t) { return nlohmann::json(t.name); }};
}

template <typename T>
std::string join_names(const std::vector<Field<T>>& fs) {
  std::string s;
  for (auto& f : fs) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

template <typename T>
std::vector<std::string> names(const std::vector<Field<T>>& fs) {
  std::vector<std::string> n;
  for (auto& f : fs) n.push_back(f.name);
  return n;
}

// Applies "field=value" to `t`, then `validate`s the result; `t` is unchanged on error.
template <typename T, typename Validate>
void apply_override(T& t, const std::string& assignment, const std::vector<Field<T>>& fs,
                    Validate validate) {
  const auto eq = assignment.find('=');
  IPUML_CHECK(eq != std::string::npos && eq > 0, "target override '", assignment,
              "' must have the form field=value; valid fields: ", join_names(fs));
  auto trim = [](std::string s) {
    const auto b = s.find_first_not_of(" \t");
    const auto e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  const std::string key = trim(assignment.substr(0, eq)), value = trim(assignment.substr(eq + 1));
  for (auto& f : fs) {
    if (key != f.name) continue;
    T copy = t;
    f.set(copy, value);
    validate(copy);
    t = copy;
    return;
  }
  fail("target override: unknown field '", key, "'; valid fields: ", join_names(fs));
}

template <typename T>
std::string to_json(const T& t, const std::vector<Field<T>>& fs) {
  nlohmann::json j = nlohmann::json::object();
  for (auto& f : fs) j[f.name] = f.get(t);
  return j.dump();
}

// A target from its JSON object (every member an override of `base`).
template <typename T, typename Apply>
T from_json(const std::string& text, T base, Apply apply) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail("target: invalid JSON: ", e.what());
  }
  IPUML_CHECK(j.is_object(), "target: expected a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string v =
        it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    apply(base, it.key() + "=" + v);
  }
  return base;
}

// Checks that `v` is finite and in [lo, hi] (or 0 where zero_ok): the range no real or
// plausible device leaves by orders of magnitude, so a typo (clock_hz=1e-300) is an error.
inline void check_range(const std::string& target, const char* n, double v, double lo, double hi,
                        bool zero_ok) {
  IPUML_CHECK(std::isfinite(v) && (v > 0 || (zero_ok && v == 0)) && (v == 0 || v >= lo) && v <= hi,
              "target ", target, ": ", n, " must be ", zero_ok ? "0 or " : "", "in [", lo, ", ", hi,
              "], got ", v);
}

}  // namespace ipuml::emu::fields
