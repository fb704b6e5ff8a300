// libFuzzer harness: the IPU plan cache. The input is an entry's payload (the plan as CBOR);
// the harness gives it a header with the right key and a correct keyed checksum, as a forger
// holding the cache key could, so plan decoding and plan_fits_graph see arbitrary plans. A
// plan that is accepted is run: it must compute what a fresh compile computes. Every input
// must be recompiled, run correctly, or throw ipuml::Error.
#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/core/sha256.hpp>
#include <ipuml/ipuml.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_support.hpp"

namespace {

using namespace ipuml;

struct Fixture {
  Tensor w = randn({16, 8});
  ir::Trace trace;
  ipu::Target target = ipu::target_preset("tiny");
  ipu::CompileOptions options;
  Tensor x = randn({4, 16});
  std::vector<float> want;
  std::string path, key;
  uint32_t version = 0;  // the cache format's, read from the entry the fresh compile wrote
  Fixture() {
    ir::Tracer tracer;
    Tensor in = tracer.input(ir::TensorMeta{{4, 16}, kFloat32}, "x");
    tracer.name_state(w, "weight");
    trace = tracer.finish({softmax(relu(matmul(in, w)), 1)});
    options.progress = false;
    options.cache_dir = (fuzz::scratch() / "cache").string();
    std::filesystem::create_directories(options.cache_dir);
    want =
        ipu::compile(trace.graph, target, options)->run({x}, trace.states, 0)[0].to_vector<float>();
    path = ipu::plan_cache_path(options.cache_dir, ipu::plan_key(trace.graph, target, options));
    std::ifstream k(std::filesystem::path(options.cache_dir) / "ipuml-cache.key", std::ios::binary);
    key.assign(std::istreambuf_iterator<char>(k), std::istreambuf_iterator<char>());
    std::ifstream entry(path, std::ios::binary);
    entry.seekg(8);
    entry.read(reinterpret_cast<char*>(&version), sizeof version);
    if (!entry || version == 0) __builtin_trap();  // the compile must have written its entry
  }
};

// The on-disk header of compiler_impl.hpp (magic, version, key, payload size, HMAC).
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t key;
  uint64_t payload_size;
  uint8_t mac[32];
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fx;
  Header h{};
  std::memcpy(h.magic, "IPUMLPLN", 8);
  h.version = fx.version;  // a stale version would be refused before any decoding
  h.key = ipu::plan_key(fx.trace.graph, fx.target, fx.options);
  h.payload_size = size;
  std::string msg(reinterpret_cast<const char*>(&h), offsetof(Header, mac));
  msg.append(reinterpret_cast<const char*>(data), size);
  const auto mac = hmac_sha256(fx.key.data(), fx.key.size(), msg.data(), msg.size());
  std::memcpy(h.mac, mac.data(), mac.size());
  {
    std::ofstream f(fx.path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    auto exe = ipu::compile(fx.trace.graph, fx.target, fx.options);
    const auto got = exe->run({fx.x}, fx.trace.states, 0)[0].to_vector<float>();
    if (got != fx.want) __builtin_trap();  // a plan that runs must compute the right thing
  } catch (const Error&) {
  }
  return 0;
}
