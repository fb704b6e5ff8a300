// The SambaNova PEF file (backends/sambanova/pef.hpp): every field written and read back, every
// damaged or hostile file refused with an ipuml::Error naming the file and what is wrong, forged
// bodies (with a valid integrity record) checked field by field, and pef_mismatch naming the
// first field a run differs in.
#include <sys/stat.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/backends/sambanova/pef.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/core/sha256.hpp>

#include "../support/error_of.hpp"
#include "../support/temp_dir.hpp"

using namespace ipuml;
using json = nlohmann::json;
using sambanova::Pef;
using sambanova::pef_mismatch;
using sambanova::read_pef;
using sambanova::write_pef;
using testing::error_of;

namespace {

const std::string kSha(64, 'a');

Pef lenet() {
  Pef p;
  p.app = "lenet";
  p.model_config = {{"num_classes", 10},
                    {"dropout", 0.25},
                    {"channels", {6, 16}},
                    {"name", "LeNet-5 \u00e9"},
                    {"nested", {{"a", {{"b", nullptr}}}}}};
  p.batch_size = 32;
  p.target = {{"preset", "sn30"}, {"overrides", {{"clock_hz", 1.6e9}}}};
  p.num_tiles = 4;
  p.optimization = "o0";
  p.world_size = 2;
  p.graph_sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  p.sections = json::array({{{"name", "fwd"}, {"pcus", 12}}, {{"name", "bwd"}, {"pcus", 20}}});
  p.ipuml_version = "0.1.0";
  return p;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void put(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// A file holding `body` under a correct integrity record, as a forger would write it.
std::string sealed(const std::string& body) {
  return "IPUML-PEF 1\nbody-bytes " + std::to_string(body.size()) + "\nbody-sha256 " +
         to_hex(sha256(body.data(), body.size())) + "\n" + body;
}

// The body a valid PEF holds, as JSON to edit.
json valid_body(const testing::TempDir& dir) {
  const std::string path = dir.file("valid.pef");
  write_pef(path, lenet());
  const std::string text = slurp(path);
  size_t at = 0;
  for (int line = 0; line < 3; ++line) at = text.find('\n', at) + 1;
  return json::parse(text.substr(at));
}

// The message read_pef gives for a file of these bytes; it must name the file first.
std::string read_error(const testing::TempDir& dir, const std::string& bytes) {
  const std::string path = dir.file("hostile.pef");
  put(path, bytes);
  const std::string e = error_of([&] { read_pef(path); });
  CHECK(e.rfind("read_pef '" + path + "': ", 0) == 0);
  return e;
}

std::string forged_error(const testing::TempDir& dir, const json& body) {
  return read_error(dir, sealed(body.dump()));
}

}  // namespace

TEST_CASE("sambanova pef: every field survives write_pef and read_pef", "[sambanova][pef]") {
  testing::TempDir dir("ipuml_pef");
  const std::string path = dir.file("pef/lenet/lenet.pef");  // parent directories are made
  const Pef p = lenet();
  write_pef(path, p);
  const std::string text = slurp(path);
  CHECK(text.rfind("IPUML-PEF 1\nbody-bytes ", 0) == 0);
  const Pef q = read_pef(path);
  CHECK(q.app == p.app);
  CHECK(q.model_config == p.model_config);
  CHECK(q.batch_size == p.batch_size);
  CHECK(q.target == p.target);
  CHECK(q.num_tiles == p.num_tiles);
  CHECK(q.optimization == p.optimization);
  CHECK(q.world_size == p.world_size);
  CHECK(q.graph_sha256 == p.graph_sha256);
  CHECK(q.sections == p.sections);
  CHECK(q.ipuml_version == p.ipuml_version);
  CHECK(pef_mismatch(path, p, q).empty());

  // Written again over the old file, with the other values of each bounded field; no temporary
  // is left beside it.
  Pef r = p;
  r.app = std::string(64, 'x');
  r.model_config = json::object();
  r.batch_size = int64_t{1} << 31;
  r.target = json::object();
  r.num_tiles = 64;
  r.optimization = "o1";
  r.world_size = 4096;
  r.sections = json::array();
  r.ipuml_version = Pef{}.ipuml_version;
  write_pef(path, r);
  const Pef s = read_pef(path);
  CHECK(s.app == r.app);
  CHECK(s.model_config == json::object());
  CHECK(s.batch_size == r.batch_size);
  CHECK(s.num_tiles == 64);
  CHECK(s.optimization == "o1");
  CHECK(s.world_size == 4096);
  CHECK(s.sections == json::array());
  CHECK(s.ipuml_version == IPUML_VERSION_STRING);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path / "pef/lenet")) {
    CHECK(e.path().filename() == "lenet.pef");
    ++files;
  }
  CHECK(files == 1);
}

TEST_CASE("sambanova pef: nesting up to the limit reads back and one level more is refused",
          "[sambanova][pef]") {
  testing::TempDir dir("ipuml_pef");
  const std::string path = dir.file("deep.pef");
  // The body's object is the first level and model_config the second.
  auto nested = [](int levels) {
    json j = 1;
    for (int i = 0; i < levels; ++i) j = json::array({j});
    return j;
  };
  Pef p = lenet();
  p.model_config = {{"deep", nested(sambanova::kPefMaxJsonDepth - 2)}};
  write_pef(path, p);
  CHECK(read_pef(path).model_config == p.model_config);
  p.model_config = {{"deep", nested(sambanova::kPefMaxJsonDepth - 1)}};
  CHECK_THAT(error_of([&] { write_pef(path, p); }),
             Catch::Contains("write_pef '" + path + "': model_config nests more than 63"));
  json body = valid_body(dir);
  body["model_config"] = p.model_config;
  CHECK_THAT(forged_error(dir, body), Catch::Contains("nests JSON more than 64 levels deep"));
  // A body of many thousand brackets is refused before any value is built.
  CHECK_THAT(read_error(dir, sealed(std::string(100000, '[') + std::string(100000, ']'))),
             Catch::Contains("nests JSON more than 64 levels deep"));
}

TEST_CASE("sambanova pef: write_pef refuses fields out of range and paths it cannot write",
          "[sambanova][pef]") {
  testing::TempDir dir("ipuml_pef");
  const std::string path = dir.file("out.pef");
  auto refused = [&](const Pef& p, const std::string& part) {
    const std::string e = error_of([&] { write_pef(path, p); });
    CHECK_THAT(e, Catch::StartsWith("write_pef '" + path + "': ") && Catch::Contains(part));
    CHECK(!std::filesystem::exists(path));
  };
  Pef p = lenet();
  p.num_tiles = 0;  // the default: a PEF says how many tiles it may use
  refused(p, "num_tiles is 0, expected an integer in [1, 64]");
  p = lenet();
  p.app = "le/net";
  refused(p, "app is \"le/net\", expected the model's name: 1 to 64 of A-Z a-z 0-9 _ . -");
  p.app = "";
  refused(p, "app is \"\"");
  p.app = std::string(65, 'a');
  refused(p, "expected the model's name");
  p = lenet();
  p.model_config = json::array({1, 2});
  refused(p, "model_config is an array, expected a JSON object");
  p = lenet();
  p.model_config = {{"lr", std::nan("")}};
  refused(p, "model_config holds a number that is not finite");
  p = lenet();
  p.batch_size = 0;
  refused(p, "batch_size is 0, expected an integer in [1, 2147483648]");
  p = lenet();
  p.target = nullptr;
  refused(p, "target is null, expected a JSON object");
  p = lenet();
  p.optimization = "o2";
  refused(p, "optimization is \"o2\", expected \"o0\" or \"o1\"");
  p = lenet();
  p.world_size = 4097;
  refused(p, "world_size is 4097, expected an integer in [1, 4096]");
  p = lenet();
  p.graph_sha256 = std::string(64, 'A');
  refused(p, "graph_sha256 is \"AAAA");
  p.graph_sha256 = "abc";
  refused(p, "expected 64 lowercase hexadecimal digits");
  p = lenet();
  p.sections = json::object();
  refused(p, "sections is an object, expected a JSON array");
  p = lenet();
  p.ipuml_version = "";
  refused(p, "ipuml_version is \"\", expected a version such as");
  p = lenet();
  p.model_config = {{"name", "\xff\xfe"}};  // not UTF-8: JSON text cannot hold it
  refused(p, "cannot write its fields as JSON");

  // A directory where the file should be, and a file where a parent directory should be.
  std::filesystem::create_directories(dir.path / "a_dir");
  CHECK_THAT(error_of([&] { write_pef(dir.file("a_dir"), lenet()); }),
             Catch::Contains("write_pef '" + dir.file("a_dir") + "': is a directory"));
  put(dir.file("plain"), "x");
  CHECK_THAT(error_of([&] { write_pef(dir.file("plain/sub/x.pef"), lenet()); }),
             Catch::StartsWith("write_pef '" + dir.file("plain/sub/x.pef") + "': "));
}

TEST_CASE("sambanova pef: files that are not whole PEFs are refused by name", "[sambanova][pef]") {
  testing::TempDir dir("ipuml_pef");
  const std::string good_path = dir.file("good.pef");
  write_pef(good_path, lenet());
  const std::string good = slurp(good_path);
  const size_t body_at = good.find("\n{") + 1;
  const std::string header = good.substr(0, body_at), body = good.substr(body_at);

  SECTION("missing, a directory, a FIFO, empty") {
    const std::string missing = dir.file("missing.pef");
    CHECK_THAT(error_of([&] { read_pef(missing); }),
               Catch::Contains("read_pef '" + missing + "': no such file"));
    CHECK_THAT(error_of([&] { read_pef(dir.path.string()); }),
               Catch::Contains("read_pef '" + dir.path.string() +
                               "': is a directory, expected a regular file"));
    const std::string fifo = dir.file("fifo.pef");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(error_of([&] { read_pef(fifo); }),
               Catch::Contains("read_pef '" + fifo + "': is a FIFO (named pipe)"));
    CHECK_THAT(read_error(dir, ""),
               Catch::Contains("the file is empty, expected an ipuml PEF (first line "
                               "\"IPUML-PEF 1\""));
  }
  SECTION("another kind of file, another format, a damaged first line") {
    CHECK_THAT(read_error(dir, std::string("PK\x03\x04zzzz", 8)),
               Catch::Contains("not an ipuml PEF: it starts with \"PK\\x03\\x04zzzz\", expected "
                               "the line \"IPUML-PEF 1\""));
    CHECK_THAT(read_error(dir, "{\"app\": \"lenet\"}"), Catch::Contains("not an ipuml PEF"));
    CHECK_THAT(read_error(dir, "IPUML-PEF 2\n" + good.substr(12)),
               Catch::Contains("a PEF of format 2; this ipuml (" IPUML_VERSION_STRING
                               ") reads format 1: compile it again with this ipuml"));
    CHECK_THAT(read_error(dir, "IPUML-PEF 10\n" + good.substr(12)),
               Catch::Contains("a PEF of format 10;"));
    CHECK_THAT(read_error(dir, "IPUML-PEF 1.5\n" + good.substr(12)),
               Catch::Contains("its first line is damaged: \"IPUML-PEF 1.5\", expected "
                               "\"IPUML-PEF 1\""));
    CHECK_THAT(read_error(dir, "IPUML-PEF 1\r\n" + good.substr(12)),
               Catch::Contains("its first line is damaged: \"IPUML-PEF 1\\x0d\""));
  }
  SECTION("truncated anywhere") {
    CHECK_THAT(read_error(dir, good.substr(0, 5)),
               Catch::Contains("truncated: the file ends after 5 bytes, inside its first line"));
    CHECK_THAT(read_error(dir, good.substr(0, 11)),
               Catch::Contains("truncated: the file ends after 11 bytes, inside its first line"));
    CHECK_THAT(read_error(dir, good.substr(0, 20)),
               Catch::Contains("truncated: the file ends after 20 bytes, inside its integrity "
                               "record"));
    CHECK_THAT(read_error(dir, header.substr(0, header.size() - 10)),
               Catch::Contains("inside its integrity record"));
    CHECK_THAT(read_error(dir, "IPUML-PEF 1\nbody-bytes 12"),
               Catch::Contains("inside its integrity record"));
    CHECK_THAT(read_error(dir, "IPUML-PEF"), Catch::Contains("inside its first line"));
    // A short file whose lines are wrong, not merely cut, is damaged.
    CHECK_THAT(read_error(dir, "IPUML-PEF 1\n{\"app\": 1}"),
               Catch::Contains("its integrity record is damaged: its second line is "
                               "\"{\\\"app\\\": 1}\""));
    CHECK_THAT(read_error(dir, "IPUML-PEF 1\nbody-bytes 2\nbody-sha256 12 {}"),
               Catch::Contains("its third line is \"body-sha256 12 {}\""));
    CHECK_THAT(read_error(dir, "IPUML-PEF 2"),
               Catch::Contains("its first line is damaged: \"IPUML-PEF 2\""));
    CHECK_THAT(read_error(dir, header), Catch::Contains("truncated: its integrity record says " +
                                                        std::to_string(body.size()) +
                                                        " bytes of body follow it, the "
                                                        "file has 0"));
    CHECK_THAT(
        read_error(dir, good.substr(0, good.size() - 1)),
        Catch::Contains("truncated: its integrity record says " + std::to_string(body.size()) +
                        " bytes of body follow it, the "
                        "file has " +
                        std::to_string(body.size() - 1)));
  }
  SECTION("a flipped byte, trailing garbage, a damaged record, a 2 GB claim") {
    std::string flipped = good;
    flipped[body_at + body.size() / 2] ^= 0x01;
    CHECK_THAT(read_error(dir, flipped),
               Catch::Contains("corrupt: the SHA-256 of its body is ") &&
                   Catch::Contains(", its integrity record says " +
                                   to_hex(sha256(body.data(), body.size()))));
    CHECK_THAT(read_error(dir, good + "garbage"),
               Catch::Contains("extended: 7 bytes of trailing data follow its body (its integrity "
                               "record says the body's " +
                               std::to_string(body.size()) + " bytes end the file)"));
    std::string upper = good;
    const size_t hex_at = good.find("body-sha256 ") + 12;
    upper[hex_at] = static_cast<char>(std::toupper(static_cast<unsigned char>(good[hex_at])));
    if (upper[hex_at] == good[hex_at]) upper[hex_at] = 'G';
    CHECK_THAT(
        read_error(dir, upper),
        Catch::Contains("its integrity record is damaged: its third line is \"body-sha256 ") &&
            Catch::Contains("expected \"body-sha256 HEX\""));
    CHECK_THAT(read_error(dir, "IPUML-PEF 1\nbody-bytes -5\nbody-sha256 " + kSha + "\n{}"),
               Catch::Contains("its integrity record is damaged: its second line is "
                               "\"body-bytes -5\", expected \"body-bytes N\""));
    CHECK_THAT(read_error(dir, "IPUML-PEF 1\nbody-bytes 99999999999999999999\nbody-sha256 " + kSha +
                                   "\n{}"),
               Catch::Contains("its second line is \"body-bytes 99999999999999999999\""));
    CHECK_THAT(read_error(dir, "IPUML-PEF 1\n" + std::string(200, 'x')),
               Catch::Contains("its integrity record is damaged: its second line is \"xxxx"));
    CHECK_THAT(read_error(dir, "IPUML-PEF 1\nbody-bytes 2000000000\nbody-sha256 " + kSha + "\n{}"),
               Catch::Contains("its integrity record claims a body of 2000000000 bytes, more "
                               "than a PEF may hold (67108864): damaged"));
    CHECK_THAT(read_error(dir, "IPUML-PEF 1\nbody-bytes 9999999999999999999\nbody-sha256 " + kSha +
                                   "\n{}"),
               Catch::Contains("claims a body of 9999999999999999999 bytes"));
  }
}

TEST_CASE("sambanova pef: forged bodies under a valid record are checked field by field",
          "[sambanova][pef]") {
  testing::TempDir dir("ipuml_pef");
  const json good = valid_body(dir);
  CHECK(read_pef(dir.file("valid.pef")).app == "lenet");
  auto with = [&](const std::string& key, const json& value) {
    json b = good;
    b[key] = value;
    return forged_error(dir, b);
  };
  auto without = [&](const std::string& key) {
    json b = good;
    b.erase(key);
    return forged_error(dir, b);
  };

  SECTION("not JSON, not an object, trailing garbage, a repeated key") {
    CHECK_THAT(read_error(dir, sealed("")), Catch::Contains("its body is not valid JSON: parse "
                                                            "error"));
    CHECK_THAT(read_error(dir, sealed("{\"app\": lenet}")),
               Catch::Contains("its body is not valid JSON: parse error at line 1"));
    CHECK_THAT(read_error(dir, sealed(good.dump() + " }")),
               Catch::Contains("its body is not valid JSON: ") &&
                   Catch::Contains("expected end of input"));
    CHECK_THAT(read_error(dir, sealed("[1, 2]")),
               Catch::Contains("its body is an array, expected a JSON object with the keys app, "
                               "model_config, batch_size, target, num_tiles, optimization, "
                               "world_size, graph_sha256, sections, ipuml_version"));
    std::string twice = good.dump();
    twice.insert(1, "\"batch_size\":1,");
    CHECK_THAT(read_error(dir, sealed(twice)),
               Catch::Contains("its body has the key \"batch_size\" twice"));
    CHECK_THAT(read_error(dir, sealed("\"\xff\"")), Catch::Contains("not valid JSON"));
  }
  SECTION("a missing or unknown key") {
    for (const char* key :
         {"app", "model_config", "batch_size", "target", "num_tiles", "optimization", "world_size",
          "graph_sha256", "sections", "ipuml_version"})
      CHECK_THAT(without(key), Catch::Contains(std::string("its body has no \"") + key +
                                               "\" (expected the keys app, model_config"));
    CHECK_THAT(with("batch", 32), Catch::Contains("its body has an unknown key \"batch\" "
                                                  "(expected only app, model_config"));
  }
  SECTION("a wrong type") {
    CHECK_THAT(with("app", 5), Catch::Contains("app is the integer 5, expected a string"));
    CHECK_THAT(with("model_config", "lr=0.1"),
               Catch::Contains("model_config is the string \"lr=0.1\", expected a JSON object"));
    CHECK_THAT(with("model_config", json::array()),
               Catch::Contains("model_config is an array, expected a JSON object"));
    CHECK_THAT(with("batch_size", "32"),
               Catch::Contains("batch_size is the string \"32\", expected an integer in [1, "
                               "2147483648]"));
    CHECK_THAT(with("batch_size", 32.5),
               Catch::Contains("batch_size is the number 32.5, expected an integer"));
    CHECK_THAT(with("num_tiles", nullptr), Catch::Contains("num_tiles is null, expected an "
                                                           "integer in [1, 64]"));
    CHECK_THAT(with("world_size", true), Catch::Contains("world_size is the boolean true"));
    CHECK_THAT(with("target", json::array()), Catch::Contains("target is an array, expected a "
                                                              "JSON object"));
    CHECK_THAT(with("optimization", json::object()),
               Catch::Contains("optimization is an object, expected a string"));
    CHECK_THAT(with("graph_sha256", 1), Catch::Contains("graph_sha256 is the integer 1"));
    CHECK_THAT(with("sections", json::object()),
               Catch::Contains("sections is an object, expected a JSON array"));
    CHECK_THAT(with("ipuml_version", 0.1), Catch::Contains("ipuml_version is the number 0.1"));
  }
  SECTION("a value out of range") {
    CHECK_THAT(with("batch_size", 0),
               Catch::Contains("batch_size is 0, expected an integer in [1, 2147483648]"));
    CHECK_THAT(with("batch_size", -3), Catch::Contains("batch_size is -3"));
    CHECK_THAT(with("batch_size", (int64_t{1} << 31) + 1), Catch::Contains("is 2147483649"));
    CHECK_THAT(with("batch_size", UINT64_MAX), Catch::Contains("is 18446744073709551615"));
    CHECK_THAT(with("batch_size", INT64_MIN), Catch::Contains("is -9223372036854775808"));
    CHECK_THAT(with("num_tiles", 65), Catch::Contains("num_tiles is 65, expected an integer in "
                                                      "[1, 64]"));
    CHECK_THAT(with("world_size", 0), Catch::Contains("world_size is 0, expected an integer in "
                                                      "[1, 4096]"));
    CHECK_THAT(with("optimization", "O1"),
               Catch::Contains("optimization is \"O1\", expected \"o0\" or \"o1\""));
    CHECK_THAT(with("app", "../../etc"), Catch::Contains("app is \"../../etc\", expected the "
                                                         "model's name"));
    CHECK_THAT(with("graph_sha256", std::string(64, 'g')),
               Catch::Contains("expected 64 lowercase hexadecimal digits"));
    CHECK_THAT(with("ipuml_version", "0.1.0 (dev)"),
               Catch::Contains("ipuml_version is \"0.1.0 (dev)\", expected a version"));
    std::string inf = good.dump();
    inf.replace(inf.find("0.25"), 4, "1e999");
    CHECK_THAT(read_error(dir, sealed(inf)),
               Catch::Contains("its body is not valid JSON: number overflow parsing '1e999'"));
  }
}

TEST_CASE("sambanova pef: pef_mismatch names the first field a run differs in",
          "[sambanova][pef]") {
  const std::string path = "pef/lenet/lenet.pef";
  const Pef compiled = lenet();
  Pef now = compiled;
  CHECK(pef_mismatch(path, compiled, now).empty());
  // What a run does not decide (target, tiles, optimization, world size, sections) is not
  // compared.
  now.num_tiles = 8;
  now.optimization = "o1";
  now.world_size = 1;
  now.target = json::object();
  now.sections = json::array();
  CHECK(pef_mismatch(path, compiled, now).empty());

  Pef b = lenet();
  b.batch_size = 1;
  now = lenet();
  CHECK(pef_mismatch(path, b, now) ==
        "pef/lenet/lenet.pef was compiled for batch size 1; this run has batch size 32: compile "
        "again with -b 32");

  now = lenet();
  now.app = "resnet";
  now.batch_size = 1;  // the app is named first
  CHECK(pef_mismatch(path, compiled, now) ==
        "pef/lenet/lenet.pef was compiled for the app lenet; this run is the app resnet: compile "
        "again for resnet");

  now = lenet();
  now.model_config["dropout"] = 0.5;
  now.model_config["num_classes"] = 100;  // a later key: the first one differing is named
  CHECK(pef_mismatch(path, compiled, now) ==
        "pef/lenet/lenet.pef was compiled with the model's dropout 0.25; this run has dropout "
        "0.5: compile again with this run's model configuration");
  now = lenet();
  now.model_config.erase("channels");
  CHECK(pef_mismatch(path, compiled, now) ==
        "pef/lenet/lenet.pef was compiled with the model's channels [6,16]; this run has "
        "channels not set: compile again with this run's model configuration");
  now = lenet();
  now.model_config["a key"] = 1;
  CHECK_THAT(pef_mismatch(path, compiled, now),
             Catch::Contains("compiled with the model's \"a key\" not set; this run has \"a "
                             "key\" 1"));
  now.model_config = json::array();
  CHECK_THAT(pef_mismatch(path, compiled, now),
             Catch::Contains("was compiled with the model configuration {") &&
                 Catch::Contains("; this run has []: compile again"));

  now = lenet();
  now.ipuml_version = "0.2.0";
  now.graph_sha256 = kSha;  // a new ipuml traces another graph: the version is named
  CHECK(pef_mismatch(path, compiled, now) ==
        "pef/lenet/lenet.pef was compiled by ipuml 0.1.0; this run is ipuml 0.2.0: compile again "
        "with this ipuml");

  now = lenet();
  now.graph_sha256 = kSha;
  CHECK(pef_mismatch(path, compiled, now) ==
        "pef/lenet/lenet.pef was compiled for a step whose graph has SHA-256 " +
            compiled.graph_sha256 + "; this run traced a graph with SHA-256 " + kSha +
            " (the model or its options changed): compile again");
}
