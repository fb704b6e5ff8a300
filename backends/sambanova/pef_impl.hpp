// Bodies of <ipuml/backends/sambanova/pef.hpp> (compiled once in src/lib/sambanova_pef.cpp).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <ipuml/backends/sambanova/pef.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/core/sha256.hpp>
#include <ipuml/io/file.hpp>

namespace ipuml::sambanova {

namespace pefdetail {

using json = nlohmann::json;

// The body's keys, in the order the checks name them.
inline constexpr const char* kKeys[] = {"app",       "model_config", "batch_size", "target",
                                        "num_tiles", "optimization", "world_size", "graph_sha256",
                                        "sections",  "ipuml_version"};
// The magic line and the integrity record take at most this many bytes.
inline constexpr size_t kHeadBytes = 128;

inline std::string key_list() {
  std::string s;
  for (const char* k : kKeys) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

inline bool is_key(const std::string& k) {
  return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* c) { return k == c; });
}

// "IPUML-PEF 1\n": the first line this ipuml writes and reads.
inline std::string magic_line() { return detail::str(kPefMagic, ' ', kPefFormat, '\n'); }

// A value as messages show it: JSON text (invalid UTF-8 replaced), cut at 80 characters.
inline std::string shown(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Bytes from a file as messages show them: printable ASCII as is (\" and \\ escaped), the rest
// as \xNN, cut at n.
inline std::string printable(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return s.size() > n ? out + "..." : out;
}

// What a JSON value is, for "... is X, expected Y".
inline std::string kind(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return j.get<bool>() ? "the boolean true" : "the boolean false";
    case json::value_t::string:
      return "the string " + shown(j);
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "the integer " + shown(j);
    case json::value_t::number_float:
      return "the number " + shown(j);
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::binary:
      return "binary data";
    case json::value_t::discarded:
      break;
  }
  return "a discarded value";
}

inline bool is_word(const std::string& s, size_t max, const char* extra) {
  return !s.empty() && s.size() <= max && std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::strchr(extra, c) != nullptr;
  });
}

// A name from a PEF or a run as messages show it: as is when it is a plain word, else quoted.
inline std::string named(const std::string& s) {
  return is_word(s, 64, "_.+-") ? s : shown(json(s));
}

inline bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

inline void check_int(const std::string& where, const char* key, int64_t v, int64_t lo,
                      int64_t hi) {
  IPUML_CHECK(v >= lo && v <= hi, where, key, " is ", v, ", expected an integer in [", lo, ", ", hi,
              "]");
}

// Walks one opaque JSON member (without recursion): at most kPefMaxJsonDepth levels counting the
// body's own object as the first, at most kPefMaxJsonValues values in the whole body (`values`
// counts them), and nothing that JSON text cannot hold. What passes here, written, reads back.
inline void check_json(const std::string& where, const char* key, const json& root,
                       int64_t& values) {
  std::vector<std::pair<const json*, int>> pending{{&root, 2}};
  while (!pending.empty()) {
    const auto [j, level] = pending.back();
    pending.pop_back();
    IPUML_CHECK(++values <= kPefMaxJsonValues, where, "the PEF holds more than ", kPefMaxJsonValues,
                " JSON values (", key, " is too large)");
    IPUML_CHECK(!j->is_number_float() || std::isfinite(j->get<double>()), where, key,
                " holds a number that is not finite (infinity or NaN), which JSON cannot hold");
    IPUML_CHECK(!j->is_binary() && !j->is_discarded(), where, key, " holds ", kind(*j),
                ", which JSON text cannot hold");
    if (!j->is_structured()) continue;
    IPUML_CHECK(level <= kPefMaxJsonDepth, where, key, " nests more than ", kPefMaxJsonDepth - 1,
                " levels deep");
    for (const json& child : *j) pending.push_back({&child, level + 1});
  }
}

// Every promise a PEF keeps, for write_pef (before writing) and read_pef (after reading).
inline void check(const Pef& p, const std::string& where) {
  IPUML_CHECK(is_word(p.app, 64, "_.-"), where, "app is ", shown(json(p.app)),
              ", expected the model's name: 1 to 64 of A-Z a-z 0-9 _ . -");
  IPUML_CHECK(p.model_config.is_object(), where, "model_config is ", kind(p.model_config),
              ", expected a JSON object (the model's hyper-parameters)");
  check_int(where, "batch_size", p.batch_size, 1, kPefMaxBatchSize);
  IPUML_CHECK(p.target.is_object(), where, "target is ", kind(p.target),
              ", expected a JSON object (the target preset and overrides)");
  check_int(where, "num_tiles", p.num_tiles, 1, kPefMaxTiles);
  IPUML_CHECK(p.optimization == "o0" || p.optimization == "o1", where, "optimization is ",
              shown(json(p.optimization)), ", expected \"o0\" or \"o1\"");
  check_int(where, "world_size", p.world_size, 1, kPefMaxWorldSize);
  IPUML_CHECK(is_sha256_hex(p.graph_sha256), where, "graph_sha256 is ", shown(json(p.graph_sha256)),
              ", expected 64 lowercase hexadecimal digits");
  IPUML_CHECK(p.sections.is_array(), where, "sections is ", kind(p.sections),
              ", expected a JSON array (the compiler's section plan)");
  IPUML_CHECK(is_word(p.ipuml_version, 64, "_.+-"), where, "ipuml_version is ",
              shown(json(p.ipuml_version)),
              ", expected a version such as \"" IPUML_VERSION_STRING
              "\" (1 to 64 of A-Z a-z 0-9 _ . + -)");
  int64_t values = 8;  // the body's object and its seven scalar members
  check_json(where, "model_config", p.model_config, values);
  check_json(where, "target", p.target, values);
  check_json(where, "sections", p.sections, values);
}

inline json to_body(const Pef& p) {
  return json{{"app", p.app},
              {"model_config", p.model_config},
              {"batch_size", p.batch_size},
              {"target", p.target},
              {"num_tiles", p.num_tiles},
              {"optimization", p.optimization},
              {"world_size", p.world_size},
              {"graph_sha256", p.graph_sha256},
              {"sections", p.sections},
              {"ipuml_version", p.ipuml_version}};
}

inline std::string string_field(const json& body, const char* key, const std::string& where) {
  const json& j = body.at(key);
  IPUML_CHECK(j.is_string(), where, key, " is ", kind(j), ", expected a string");
  return j.get<std::string>();
}

inline int64_t int_field(const json& body, const char* key, int64_t lo, int64_t hi,
                         const std::string& where) {
  const json& j = body.at(key);
  IPUML_CHECK(j.is_number_integer(), where, key, " is ", kind(j), ", expected an integer in [", lo,
              ", ", hi, "]");
  if (j.is_number_unsigned()) {
    const auto u = j.get<uint64_t>();
    IPUML_CHECK(u <= static_cast<uint64_t>(hi), where, key, " is ", u, ", expected an integer in [",
                lo, ", ", hi, "]");
    return static_cast<int64_t>(u);
  }
  return j.get<int64_t>();  // check() tells a negative one
}

inline Pef from_body(const json& body, const std::string& where) {
  IPUML_CHECK(body.is_object(), where, "its body is ", kind(body),
              ", expected a JSON object with the keys ", key_list());
  for (const char* k : kKeys)
    IPUML_CHECK(body.contains(k), where, "its body has no \"", k, "\" (expected the keys ",
                key_list(), ")");
  for (const auto& item : body.items())
    IPUML_CHECK(is_key(item.key()), where, "its body has an unknown key ", shown(json(item.key())),
                " (expected only ", key_list(), ")");
  Pef p;
  p.app = string_field(body, "app", where);
  p.model_config = body.at("model_config");
  p.batch_size = int_field(body, "batch_size", 1, kPefMaxBatchSize, where);
  p.target = body.at("target");
  p.num_tiles = int_field(body, "num_tiles", 1, kPefMaxTiles, where);
  p.optimization = string_field(body, "optimization", where);
  p.world_size = int_field(body, "world_size", 1, kPefMaxWorldSize, where);
  p.graph_sha256 = string_field(body, "graph_sha256", where);
  p.sections = body.at("sections");
  p.ipuml_version = string_field(body, "ipuml_version", where);
  check(p, where);
  return p;
}

// A first pass over the body that builds nothing: JSON syntax, nesting depth, the number of
// values and repeated keys of the body's own object, before any value is allocated.
struct Scan {
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  std::string problem;
  int depth = 0;
  int64_t values = 0;
  std::set<std::string> top_keys;

  bool value() {
    if (++values <= kPefMaxJsonValues) return true;
    problem = detail::str("its body holds more than ", kPefMaxJsonValues, " JSON values");
    return false;
  }
  bool open() {
    if (!value()) return false;
    if (++depth <= kPefMaxJsonDepth) return true;
    problem = detail::str("its body nests JSON more than ", kPefMaxJsonDepth, " levels deep");
    return false;
  }
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(number_integer_t) { return value(); }
  bool number_unsigned(number_unsigned_t) { return value(); }
  bool number_float(number_float_t, const string_t&) { return value(); }
  bool string(string_t&) { return value(); }
  bool binary(binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(); }
  bool start_array(std::size_t) { return open(); }
  bool end_object() {
    --depth;
    return true;
  }
  bool end_array() {
    --depth;
    return true;
  }
  bool key(string_t& k) {
    if (depth != 1 || top_keys.insert(k).second) return true;
    problem = detail::str("its body has the key ", shown(json(k)), " twice");
    return false;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, ..." without the bracket.
    std::string what = e.what();
    if (!what.empty() && what.front() == '[' && what.find("] ") != std::string::npos)
      what = what.substr(what.find("] ") + 2);
    problem = "its body is not valid JSON: " + what;
    return false;
  }
};

}  // namespace pefdetail

IPUML_INLINE void write_pef(const std::string& path, const Pef& pef) {
  namespace fs = std::filesystem;
  using pefdetail::json;
  const std::string where = detail::str("write_pef '", path, "': ");
  pefdetail::check(pef, where);
  std::string body;
  try {
    body = pefdetail::to_body(pef).dump(1) + "\n";
    if (body.size() > kPefMaxBodyBytes) body = pefdetail::to_body(pef).dump() + "\n";
  } catch (const json::exception& e) {
    fail(where, "cannot write its fields as JSON: ", e.what());
  }
  IPUML_CHECK(body.size() <= kPefMaxBodyBytes, where, "its body would take ", body.size(),
              " bytes, more than a PEF may hold (", kPefMaxBodyBytes, ")");
  const std::string text =
      detail::str(pefdetail::magic_line(), "body-bytes ", body.size(), "\nbody-sha256 ",
                  to_hex(sha256(body.data(), body.size())), "\n", body);
  io::check_writable_path(path, "write_pef", true);
  io::remove_stale_temporaries(path, ".tmp-");
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  // A new file of our own: never through a link planted at the temporary's name.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  IPUML_CHECK(fd >= 0, where, "cannot create '", tmp, "': ", std::strerror(errno));
  int err = 0;
  for (size_t done = 0; done < text.size() && err == 0;) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) err = w < 0 ? errno : ENOSPC;
    if (w > 0) done += static_cast<size_t>(w);
  }
  // The rename must not reach the disk before the data does.
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail(where, "cannot write '", tmp, "': ", std::strerror(err));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    ::unlink(tmp.c_str());
    fail(where, "cannot rename '", tmp, "' over it: ", ec.message());
  }
  const fs::path dir = fs::absolute(fs::path(path), ec).parent_path();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

IPUML_INLINE Pef read_pef(const std::string& path) {
  using pefdetail::json;
  using pefdetail::printable;
  const std::string who = "read_pef";
  const std::string where = detail::str(who, " '", path, "': ");
  const io::RegularFile f = io::open_regular_file(path, who);
  const std::string magic = pefdetail::magic_line();
  const std::string expected_first = magic.substr(0, magic.size() - 1);  // "IPUML-PEF 1"
  IPUML_CHECK(f.size() > 0, where, "the file is empty, expected an ipuml PEF (first line \"",
              expected_first, "\", written by compile)");
  std::string head(static_cast<size_t>(std::min<uint64_t>(f.size(), pefdetail::kHeadBytes)), '\0');
  f.read_at(0, head.data(), head.size(), who);
  const bool whole = head.size() == f.size();

  // The first line: "IPUML-PEF 1".
  const std::string prefix = std::string(kPefMagic) + " ";
  if (head.compare(0, prefix.size(), prefix) != 0) {
    IPUML_CHECK(!(whole && prefix.compare(0, head.size(), head) == 0), where,
                "truncated: the file ends after ", f.size(),
                " bytes, inside its first line (expected \"", expected_first, "\")");
    fail(where, "not an ipuml PEF: it starts with \"", printable(head, 16),
         "\", expected the line \"", expected_first, "\" (a PEF that ipuml's compile wrote)");
  }
  const size_t eol = head.find('\n');
  const std::string version =
      head.substr(prefix.size(), eol == std::string::npos ? 16 : eol - prefix.size());
  const std::string format = std::to_string(kPefFormat);
  IPUML_CHECK(
      !(eol == std::string::npos && whole && format.compare(0, version.size(), version) == 0),
      where, "truncated: the file ends after ", f.size(),
      " bytes, inside its first line (expected \"", expected_first, "\")");
  if (head.compare(0, magic.size(), magic) != 0) {
    const bool number = eol != std::string::npos && !version.empty() && version.size() <= 9 &&
                        version.front() != '0' &&
                        version.find_first_not_of("0123456789") == std::string::npos;
    IPUML_CHECK(!number, where, "a PEF of format ", version, "; this ipuml (", IPUML_VERSION_STRING,
                ") reads format ", kPefFormat, ": compile it again with this ipuml");
    fail(where, "its first line is damaged: \"", printable(prefix + version, 24), "\", expected \"",
         expected_first, "\"");
  }

  // The integrity record: "body-bytes N" and "body-sha256 HEX", one line each. A file that ends
  // inside a line that is right so far is truncated; any other line is damaged.
  const std::string k1 = "body-bytes ", k2 = "body-sha256 ";
  auto fits = [](const std::string& line, const std::string& key, const char* allowed, size_t max) {
    if (line.size() <= key.size()) return key.compare(0, line.size(), line) == 0;
    return line.compare(0, key.size(), key) == 0 && line.size() - key.size() <= max &&
           line.find_first_not_of(allowed, key.size()) == std::string::npos;
  };
  const std::string record = head.substr(magic.size());
  const std::string truncated_record =
      detail::str("truncated: the file ends after ", f.size(),
                  " bytes, inside its integrity record (expected the lines \"body-bytes N\" and "
                  "\"body-sha256 HEX\" after the first)");
  const size_t eol1 = record.find('\n');
  const std::string line1 = record.substr(0, eol1);
  const bool fits1 = fits(line1, k1, "0123456789", 19);
  IPUML_CHECK(!(eol1 == std::string::npos && whole && fits1), where, truncated_record);
  IPUML_CHECK(eol1 != std::string::npos && fits1 && line1.size() > k1.size(), where,
              "its integrity record is damaged: its second line is \"", printable(line1, 40),
              "\", expected \"body-bytes N\" (the body's size in bytes)");
  const size_t eol2 = record.find('\n', eol1 + 1);
  const std::string line2 =
      record.substr(eol1 + 1, eol2 == std::string::npos ? eol2 : eol2 - eol1 - 1);
  const bool fits2 = fits(line2, k2, "0123456789abcdef", 64);
  IPUML_CHECK(!(eol2 == std::string::npos && whole && fits2), where, truncated_record);
  IPUML_CHECK(eol2 != std::string::npos && fits2 && line2.size() == k2.size() + 64, where,
              "its integrity record is damaged: its third line is \"", printable(line2, 40),
              "\", expected \"body-sha256 HEX\" (the body's SHA-256, 64 lowercase hexadecimal "
              "digits)");
  const std::string digits = line1.substr(k1.size()), hex = line2.substr(k2.size());
  const uint64_t claimed = std::stoull(digits);
  const uint64_t header = magic.size() + eol2 + 1, actual = f.size() - header;
  IPUML_CHECK(claimed <= kPefMaxBodyBytes, where, "its integrity record claims a body of ", claimed,
              " bytes, more than a PEF may hold (", kPefMaxBodyBytes, "): damaged");
  IPUML_CHECK(actual >= claimed, where, "truncated: its integrity record says ", claimed,
              " bytes of body follow it, the file has ", actual);
  IPUML_CHECK(actual <= claimed, where, "extended: ", actual - claimed,
              " bytes of trailing data follow its body (its integrity record says the body's ",
              claimed, " bytes end the file)");

  std::string body(static_cast<size_t>(claimed), '\0');
  if (!body.empty()) f.read_at(header, body.data(), body.size(), who);
  const std::string got = to_hex(sha256(body.data(), body.size()));
  IPUML_CHECK(got == hex, where, "corrupt: the SHA-256 of its body is ", got,
              ", its integrity record says ", hex, " (damaged, or edited after compile)");

  pefdetail::Scan scan;
  if (!json::sax_parse(body, &scan))
    fail(where, scan.problem.empty() ? std::string("its body is not valid JSON") : scan.problem);
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {
    fail(where, "its body is not valid JSON: ", e.what());
  }
  return pefdetail::from_body(parsed, where);
}

IPUML_INLINE std::string pef_mismatch(const std::string& path, const Pef& compiled,
                                      const Pef& now) {
  using pefdetail::json;
  using pefdetail::named;
  using pefdetail::shown;
  if (compiled.app != now.app)
    return detail::str(path, " was compiled for the app ", named(compiled.app),
                       "; this run is the app ", named(now.app), ": compile again for ",
                       named(now.app));
  if (compiled.model_config != now.model_config) {
    const json& a = compiled.model_config;
    const json& b = now.model_config;
    if (a.is_object() && b.is_object()) {
      std::set<std::string> keys;
      for (const auto& item : a.items()) keys.insert(item.key());
      for (const auto& item : b.items()) keys.insert(item.key());
      for (const std::string& k : keys) {
        const auto x = a.find(k), y = b.find(k);
        const bool in_a = x != a.end(), in_b = y != b.end();
        if (in_a == in_b && *x == *y) continue;
        const std::string name = pefdetail::is_word(k, 64, "_.-") ? k : shown(json(k));
        return detail::str(path, " was compiled with the model's ", name, " ",
                           in_a ? shown(*x) : std::string("not set"), "; this run has ", name, " ",
                           in_b ? shown(*y) : std::string("not set"),
                           ": compile again with this run's model configuration");
      }
    }
    return detail::str(path, " was compiled with the model configuration ", shown(a),
                       "; this run has ", shown(b),
                       ": compile again with this run's model configuration");
  }
  if (compiled.batch_size != now.batch_size)
    return detail::str(path, " was compiled for batch size ", compiled.batch_size,
                       "; this run has batch size ", now.batch_size, ": compile again with -b ",
                       now.batch_size);
  if (compiled.ipuml_version != now.ipuml_version)
    return detail::str(path, " was compiled by ipuml ", named(compiled.ipuml_version),
                       "; this run is ipuml ", named(now.ipuml_version),
                       ": compile again with this ipuml");
  if (compiled.graph_sha256 != now.graph_sha256)
    return detail::str(path, " was compiled for a step whose graph has SHA-256 ",
                       named(compiled.graph_sha256), "; this run traced a graph with SHA-256 ",
                       named(now.graph_sha256),
                       " (the model or its options changed): compile again");
  return {};
}

}  // namespace ipuml::sambanova
