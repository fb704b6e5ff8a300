// Tests of files that try to hurt their reader (issue 19): SHA-256 against the NIST and RFC 4231
// vectors, regular-file-only opens (FIFOs, directories, permission denied), and checkpoints that
// are corrupt, truncated, crafted to overflow allocations, linked in cycles, or hold values an
// optimizer must not resume from; each is refused with a clear error before harm is done.
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/core/sha256.hpp>
#include <ipuml/datasets/mnist.hpp>
#include <ipuml/io/file.hpp>
#include <ipuml/ipuml.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../support/error_of.hpp"
#include "../support/temp_dir.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#if IPUML_WITH_HDF5
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/io/hdf5.hpp>
#include <ipuml/optim/sgd.hpp>

#include <hdf5.h>
#endif

namespace fs = std::filesystem;
using namespace ipuml;

namespace {

using ipuml::testing::error_of;

std::string hex_of(const std::string& s) { return to_hex(sha256(s)); }

// A pid that no process has: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

}  // namespace

TEST_CASE("sha256 and hmac-sha256 match the published test vectors", "[hostile]") {
  CHECK(hex_of("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex_of("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(hex_of(two_blocks) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(hex_of(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Fed in uneven pieces, the same digest.
  Sha256 h;
  for (size_t at = 0, step = 1; at < million.size(); at += step, step = step * 3 % 997 + 1)
    h.update(million.data() + at, std::min(step, million.size() - at));
  CHECK(to_hex(h.finish()) == hex_of(million));

  // RFC 4231 cases 1, 2 and 6 (a key longer than the block).
  const std::string k1(20, '\x0b'), d1 = "Hi There";
  CHECK(to_hex(hmac_sha256(k1.data(), k1.size(), d1.data(), d1.size())) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const std::string k2 = "Jefe", d2 = "what do ya want for nothing?";
  CHECK(to_hex(hmac_sha256(k2.data(), k2.size(), d2.data(), d2.size())) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::string k6(131, '\xaa'), d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  CHECK(to_hex(hmac_sha256(k6.data(), k6.size(), d6.data(), d6.size())) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("only regular files are opened: FIFOs and directories are refused at once", "[hostile]") {
  testing::TempDir dir("ipuml_hostile_open");
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THAT(error_of([&] { io::open_regular_file(fifo, "reader"); }),
             Catch::Contains("reader '" + fifo + "'") && Catch::Contains("FIFO"));
  CHECK_THAT(error_of([&] { io::open_regular_file(dir.path.string(), "reader"); }),
             Catch::Contains("a directory, expected a regular file"));
  CHECK_THAT(error_of([&] { io::open_regular_file("/dev/null", "reader"); }),
             Catch::Contains("character device"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));  // nothing blocked
  CHECK_THAT(error_of([&] { io::open_regular_file(dir.file("absent"), "reader"); }),
             Catch::Contains("no such file"));

  const std::string file = dir.file("data.bin");
  std::ofstream(file) << "0123456789";
  CHECK(io::read_regular_file(file, "reader", 10).size() == 10);
  CHECK_THAT(error_of([&] { io::read_regular_file(file, "reader", 9); }),
             Catch::Contains("10 bytes is more than the largest expected (9)"));
  const std::string link = dir.file("link");
  fs::create_symlink(file, link);
  CHECK(io::open_regular_file(link, "reader").size() == 10);
  CHECK_THAT(error_of([&] { io::open_regular_file(link, "reader", false); }),
             Catch::Contains("symbolic link"));

  // Permission denied is said as such. Root reads any file, but not a write-only sysctl.
  std::string unreadable = dir.file("secret");
  std::ofstream(unreadable) << "x";
  ::chmod(unreadable.c_str(), 0);
  if (::geteuid() == 0) unreadable = "/proc/sys/vm/drop_caches";
  if (::access(unreadable.c_str(), R_OK) != 0 && fs::exists(unreadable))
    CHECK_THAT(error_of([&] { io::open_regular_file(unreadable, "reader"); }),
               Catch::Contains("permission denied"));

  CHECK_THAT(error_of([&] { io::check_writable_path(dir.path.string(), "out"); }),
             Catch::Contains("is a directory"));
  CHECK_THAT(error_of([&] { io::check_writable_path(dir.file("no/such/dir/f.h5"), "out"); }),
             Catch::Contains("does not exist"));
  CHECK_NOTHROW(io::check_writable_path(dir.file("new/f.h5"), "out", true));
  CHECK(fs::is_directory(dir.path / "new"));
  CHECK_THAT(error_of([&] { io::check_writable_path(fifo, "out"); }), Catch::Contains("FIFO"));
}

TEST_CASE("mnist IDX files: a directory or FIFO in a file's place is named, never read",
          "[hostile]") {
  testing::TempDir dir("ipuml_hostile_idx");
  fs::create_directories(dir.path / "train-images-idx3-ubyte");
  CHECK_THAT(error_of([&] { datasets::load_mnist(dir.path.string(), true); }),
             Catch::Contains("train-images-idx3-ubyte' is a directory, expected the IDX file"));
  const std::string fifo = dir.file("t10k-images-idx3-ubyte");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::ofstream(dir.file("t10k-labels-idx1-ubyte")) << "x";
  CHECK_THAT(error_of([&] { datasets::load_mnist(dir.path.string(), false); }),
             Catch::Contains("is a FIFO (named pipe), expected the IDX file"));
  CHECK_THAT(error_of([&] { datasets::read_mnist(fifo, dir.file("t10k-labels-idx1-ubyte")); }),
             Catch::Contains("FIFO"));
}

TEST_CASE("target overrides found by fuzzing get ipuml errors", "[hostile]") {
  // A name with bytes that are not UTF-8 made to_json throw nlohmann's type_error.
  const fs::path regressions = fs::path(IPUML_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
  int seen = 0;
  for (const auto& e : fs::directory_iterator(regressions)) {
    if (e.path().filename().string().rfind("target_override-", 0) != 0) continue;
    ++seen;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ipu::Target t = ipu::target_preset("ipu2");
    CHECK_THROWS_AS(ipu::apply_override(t, text), Error);
    CHECK_THROWS_AS(ipu::target_from_json(text), Error);
  }
  CHECK(seen >= 1);
  ipu::Target t = ipu::target_preset("ipu2");
  CHECK_THAT(error_of([&] { ipu::apply_override(t, std::string("name=a\xff")); }),
             Catch::Contains("name must be 1 to 64 letters") && Catch::Contains("a\\xff"));
  CHECK_NOTHROW(ipu::apply_override(t, "name=my-ipu_2.1"));
  CHECK(t.name == "my-ipu_2.1");
}

#if IPUML_WITH_HDF5

namespace {

struct TwoLayer : nn::Module {
  Tensor w, b;
  TwoLayer() : nn::Module("TwoLayer") {
    Generator g(7);
    w = register_parameter("w", randn({4, 3}, &g));
    b = register_parameter("b", randn({4}, &g));
  }
};

// Rewrites a checkpoint's integrity record for its current contents, as a forger who knows the
// format would: the checks after the record must hold on their own.
void reseal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string body = bytes.substr(io::kCheckpointUserBlock);
  std::string block = "ipuml checkpoint integrity v1\nbody-bytes " + std::to_string(body.size()) +
                      "\nbody-sha256 " + hex_of(body) + "\n";
  block.resize(io::kCheckpointUserBlock, '\0');
  std::ofstream(path, std::ios::binary) << block << body;
}

// Edits a checkpoint with the raw HDF5 API (what a crafted file can hold), then reseals it.
void craft(const std::string& path, const std::function<void(hid_t)>& edit) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  edit(f);
  REQUIRE(H5Fclose(f) >= 0);
  reseal(path);
}

// A fixed-length string attribute, as save_checkpoint writes them.
void put_string_attr(hid_t obj, const char* name, const std::string& value) {
  H5Adelete(obj, name);
  H5Eclear2(H5E_DEFAULT);
  const hid_t str = H5Tcopy(H5T_C_S1);
  H5Tset_size(str, value.size());
  const hid_t scalar = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(obj, name, str, scalar, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, str, value.data());
  H5Aclose(a);
  H5Sclose(scalar);
  H5Tclose(str);
}

// A float32 dataset of `dims` with chunked (unallocated) storage: a tiny file claiming a huge
// tensor, tagged as save_checkpoint tags its datasets.
void huge_dataset(hid_t f, const std::string& name, std::vector<hsize_t> dims) {
  H5Ldelete(f, name.c_str(), H5P_DEFAULT);
  H5Eclear2(H5E_DEFAULT);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  std::vector<hsize_t> chunk(dims.size(), 1);
  H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  const hid_t ds =
      H5Dcreate2(f, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  REQUIRE(ds >= 0);
  put_string_attr(ds, "dtype", "float32");
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
}

}  // namespace

TEST_CASE("checkpoint integrity record: corrupt, truncated, extended and foreign files",
          "[hostile][checkpoint]") {
  testing::TempDir dir("ipuml_hostile_ck");
  TwoLayer net;
  const std::string good = dir.file("good.h5");
  io::save_checkpoint(good, net, {{"group.0.lr", scalar_tensor(0.1)}}, 4);
  {
    std::ifstream in(good, std::ios::binary);
    std::string head(64, '\0');
    in.read(head.data(), 64);
    CHECK(head.rfind("ipuml checkpoint integrity v1\nbody-bytes ", 0) == 0);
  }
  CHECK(io::read_checkpoint(good).verified);

  // Every single-byte change after the user block is caught before libhdf5 reads the file
  // (sampled over the whole body).
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int refused = 0, tried = 0;
  for (size_t at = io::kCheckpointUserBlock; at < bytes.size(); at += bytes.size() / 97 + 1) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    const std::string p = dir.file("flip.h5");
    std::ofstream(p, std::ios::binary | std::ios::trunc) << flipped;
    TwoLayer other;
    ++tried;
    refused += error_of([&] { io::load_checkpoint(p, other); }).find("corrupt: the SHA-256") !=
               std::string::npos;
  }
  CHECK(refused == tried);
  CHECK(tried > 90);

  const std::string cut = dir.file("cut.h5");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  CHECK_THAT(error_of([&] { io::load_checkpoint(cut, net); }),
             Catch::Contains("truncated: the integrity record says"));
  std::ofstream(cut, std::ios::binary | std::ios::trunc) << bytes.substr(0, 300);
  CHECK_THAT(error_of([&] { io::load_checkpoint(cut, net); }),
             Catch::Contains("ends inside its integrity record"));
  const std::string longer = dir.file("longer.h5");
  std::ofstream(longer, std::ios::binary) << bytes << "trailing";
  CHECK_THAT(error_of([&] { io::load_checkpoint(longer, net); }), Catch::Contains("extended"));
  std::string bad_record = bytes;
  bad_record[45] = 'x';  // inside "body-bytes N"
  const std::string damaged = dir.file("damaged.h5");
  std::ofstream(damaged, std::ios::binary) << bad_record;
  CHECK_THAT(error_of([&] { io::load_checkpoint(damaged, net); }),
             Catch::Contains("integrity record is damaged"));

  // A file from another tool: refused unless allowed, then read with every check.
  const std::string foreign = dir.file("foreign.h5");
  {
    io::H5File f(foreign, io::H5File::Mode::truncate);
    f.set_attr("/", "ipuml_checkpoint", int64_t{1});
    f.set_attr("/", "step", int64_t{2});
    f.write<float>("model/w", {4, 3}, std::vector<float>(12, 0.5f));
    f.set_attr("model/w", "dtype", "float32");
    f.write<float>("model/b", {4}, std::vector<float>(4, 0.25f));
    f.set_attr("model/b", "dtype", "float32");
  }
  CHECK_THAT(error_of([&] { io::load_checkpoint(foreign, net); }),
             Catch::Contains("no ipuml integrity record") && Catch::Contains("allow_unverified"));
  io::CheckpointReadOptions unverified;
  unverified.allow_unverified = true;
  CHECK(io::load_checkpoint(foreign, net, nullptr, nullptr, unverified) == 2);
  CHECK(net.w.to_vector<float>() == std::vector<float>(12, 0.5f));
  CHECK_FALSE(io::read_checkpoint(foreign, unverified).verified);

  // A per-tensor checksum catches a changed value even in an unverified file.
  const std::string edited = dir.file("edited.h5");
  fs::copy_file(good, edited);
  {
    io::H5File f(edited, io::H5File::Mode::read_write);
    const std::string sum = f.attr_string("model/b", "sha256");
    f.write<float>("model/b", {4}, std::vector<float>{1, 2, 3, 4});
    f.set_attr("model/b", "dtype", "float32");
    f.set_attr("model/b", "order", int64_t{1});
    f.set_attr("model/b", "sha256", sum);
  }
  CHECK_THAT(error_of([&] { io::load_checkpoint(edited, net, nullptr, nullptr, unverified); }),
             Catch::Contains("'b' is corrupt: the SHA-256 of its values"));
}

TEST_CASE("crafted checkpoints: huge shapes, link cycles, FIFOs and bad values get clear errors",
          "[hostile][checkpoint]") {
  testing::TempDir dir("ipuml_hostile_craft");
  TwoLayer net;
  const std::string good = dir.file("good.h5");
  optim::SGD sgd(net.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  io::save_checkpoint(good, net, sgd.state_dict(), 3);
  const auto weights = net.w.to_vector<float>();
  auto variant = [&](const std::string& name, const std::function<void(hid_t)>& edit) {
    const std::string p = dir.file(name);
    fs::copy_file(good, p);
    craft(p, edit);
    return p;
  };
  auto load_all = [&](const std::string& p) {
    TwoLayer other;
    nn::StateDict opt;
    io::load_checkpoint(p, other, &opt);
    optim::SGD s(other.parameters(), optim::SGDOptions(0.1).momentum(0.9));
    s.load_state_dict(opt);
  };

  // [2^31, 2^31] float32 wrapped the byte count (heap overflow); 2^40 elements threw
  // std::bad_alloc. Both are refused before any allocation, in the model (against the
  // module's shape) and in the optimizer state (against what the file can hold).
  const hsize_t two31 = hsize_t{1} << 31, two40 = hsize_t{1} << 40;
  auto wrap_model = variant("wrap_model.h5", [&](hid_t f) {
    huge_dataset(f, "model/w", {two31, two31});
  });
  CHECK_THAT(
      error_of([&] { load_all(wrap_model); }),
      Catch::Contains("'w' has shape [2147483648, 2147483648] in the checkpoint but [4, 3]"));
  auto wrap_opt = variant("wrap_opt.h5", [&](hid_t f) {
    huge_dataset(f, "optimizer/state/0/momentum_buffer", {two31, two31});
  });
  CHECK_THAT(error_of([&] { load_all(wrap_opt); }),
             Catch::Contains("'state.0.momentum_buffer' claims shape [2147483648, 2147483648]") &&
                 Catch::Contains("more than the file can hold"));
  auto big_opt = variant("big_opt.h5", [&](hid_t f) {
    huge_dataset(f, "optimizer/state/0/momentum_buffer", {two40});
  });
  CHECK_THAT(error_of([&] { load_all(big_opt); }),
             Catch::Contains("(4398046511104 bytes), more than the file can hold"));
  CHECK_THAT(error_of([&] { io::read_checkpoint(big_opt); }),
             Catch::Contains("more than the file can hold"));

  // A group linked into itself made list_state's path grow forever; soft and external links
  // (an external one could name a FIFO) are refused the same way, before anything is read.
  auto cycle = variant("cycle.h5", [](hid_t f) {
    REQUIRE(H5Lcreate_hard(f, "optimizer", f, "optimizer/group/loop", H5P_DEFAULT, H5P_DEFAULT) >=
            0);
  });
  CHECK_THAT(error_of([&] { load_all(cycle); }),
             Catch::Contains("more than one link") && Catch::Contains("cycle"));
  auto soft = variant("soft.h5", [](hid_t f) {
    REQUIRE(H5Lcreate_soft("/model", f, "optimizer/group/again", H5P_DEFAULT, H5P_DEFAULT) >= 0);
  });
  CHECK_THAT(error_of([&] { load_all(soft); }), Catch::Contains("is a soft link"));
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto external = variant("external.h5", [&](hid_t f) {
    REQUIRE(H5Lcreate_external(fifo.c_str(), "/x", f, "model/elsewhere", H5P_DEFAULT,
                               H5P_DEFAULT) >= 0);
  });
  CHECK_THAT(error_of([&] { load_all(external); }), Catch::Contains("is an external link"));
  // The FIFO itself as the checkpoint.
  CHECK_THAT(error_of([&] { load_all(fifo); }), Catch::Contains("FIFO (named pipe)"));

  // Values an optimizer must not resume from.
  auto with_value = [&](const std::string& name, const std::string& object, float value) {
    return variant(name, [&](hid_t f) {
      const hid_t ds = H5Dopen2(f, object.c_str(), H5P_DEFAULT);
      REQUIRE(ds >= 0);
      const hid_t space = H5Dget_space(ds);
      std::vector<float> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space)), value);
      H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
      H5Sclose(space);
      // The per-tensor checksum is recomputed too: a forger's file.
      const std::string sum = to_hex(sha256(v.data(), v.size() * sizeof(float)));
      put_string_attr(ds, "sha256", sum);
      H5Dclose(ds);
    });
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_THAT(error_of([&] { load_all(with_value("nan_w.h5", "model/w", nan)); }),
             Catch::Contains("'w' holds 12 non-finite values"));
  CHECK_THAT(error_of([&] { load_all(with_value("nan_lr.h5", "optimizer/group/0/lr", nan)); }),
             Catch::Contains("'group.0.lr' holds 1 non-finite"));
  CHECK_THAT(error_of([&] { load_all(with_value("neg_lr.h5", "optimizer/group/0/lr", -100)); }),
             Catch::Contains("optimizer 'group.0.lr' is -100, expected >= 0"));
  auto step_of = [&](const std::string& name, int64_t step) {
    return variant(name, [&](hid_t f) {
      const hid_t a = H5Aopen(f, "step", H5P_DEFAULT);
      H5Awrite(a, H5T_NATIVE_INT64, &step);
      H5Aclose(a);
    });
  };
  CHECK_THAT(error_of([&] { load_all(step_of("step_neg.h5", -5)); }),
             Catch::Contains("step -5 is outside [0, 2^53]"));
  CHECK_THAT(error_of([&] { load_all(step_of("step_big.h5", int64_t{1} << 62)); }),
             Catch::Contains("is outside [0, 2^53]"));
  CHECK_THAT(error_of([&] { io::save_checkpoint(dir.file("neg.h5"), net, {}, -5); }),
             Catch::Contains("step -5 is outside"));

  // An int64 momentum buffer: a valid tensor, but not what SGD keeps.
  const std::string int_state = dir.file("int_state.h5");
  io::save_checkpoint(int_state, net,
                      {{"state.0.momentum_buffer", zeros({4, 3}, kInt64)},
                       {"state.1.momentum_buffer", zeros({4})},
                       {"group.0.lr", scalar_tensor(0.1)}},
                      1);
  CHECK_THAT(error_of([&] { load_all(int_state); }),
             Catch::Contains("'state.0.momentum_buffer' is int64 in the state dict but float32"));

  // None of the refused files changed the module they were loaded into.
  CHECK(net.w.to_vector<float>() == weights);
  CHECK_NOTHROW(load_all(good));
}

TEST_CASE("checkpoints found by fuzzing and forged storage are refused, not parsed",
          "[hostile][checkpoint]") {
  testing::TempDir dir("ipuml_hostile_regress");
  TwoLayer net;
  // Inputs tests/fuzz kept: a checkpoint_sealed-* input is a body the harness seals with a
  // valid integrity record first, as a forger would; a checkpoint-* input is the file itself.
  const fs::path regressions = fs::path(IPUML_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
  for (const auto& e : fs::directory_iterator(regressions)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint", 0) != 0) continue;
    INFO(name);
    std::ifstream in(e.path(), std::ios::binary);
    const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(!input.empty());
    const std::string p = dir.file("regression.h5");
    const bool sealed = name.rfind("checkpoint_sealed-", 0) == 0;
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        << (sealed ? std::string(io::kCheckpointUserBlock, '\0') : std::string()) << input;
    if (sealed) reseal(p);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(io::read_checkpoint(p), Error);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }

  // What save_checkpoint never writes is refused in a verified file before libhdf5 reads it: a
  // variable-length string (libhdf5's global heap looped on a crafted one) and chunked storage.
  const std::string good = dir.file("good.h5");
  io::save_checkpoint(good, net, {}, 1);
  auto variant = [&](const std::string& name, const std::function<void(hid_t)>& edit) {
    const std::string p = dir.file(name);
    fs::copy_file(good, p);
    craft(p, edit);
    return p;
  };
  const auto vlen = variant("vlen.h5", [](hid_t f) {
    const hid_t ds = H5Dopen2(f, "model/b", H5P_DEFAULT);
    H5Adelete(ds, "dtype");
    const hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, H5T_VARIABLE);
    const hid_t scalar = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(ds, "dtype", str, scalar, H5P_DEFAULT, H5P_DEFAULT);
    const char* v = "float32";
    H5Awrite(a, str, &v);
    H5Aclose(a);
    H5Sclose(scalar);
    H5Tclose(str);
    H5Dclose(ds);
  });
  CHECK_THAT(error_of([&] { io::load_checkpoint(vlen, net); }),
             Catch::Contains("is a variable-length string"));
  const auto chunked = variant("chunked.h5", [](hid_t f) { huge_dataset(f, "model/b", {4}); });
  CHECK_THAT(error_of([&] { io::load_checkpoint(chunked, net); }),
             Catch::Contains("'b' is not stored as save_checkpoint stores tensors"));
}

TEST_CASE("training resumed mid-run from a checkpoint is bit-identical on eager, cpu and ipu",
          "[hostile][checkpoint]") {
  testing::TempDir dir("ipuml_hostile_resume");
  Generator g(3);
  const int steps = 6, cut = 3;
  std::vector<Tensor> xs, ys;
  for (int s = 0; s < steps; ++s) {
    xs.push_back(randn({4, 8}, &g));
    ys.push_back(randint(0, 4, {4}, &g));
  }
  auto ce = [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
  for (const std::string device : {"eager", "cpu", "ipu"}) {
    INFO("device " << device);
    struct Run {
      nn::Sequential model;
      optim::SGD sgd;
      std::optional<runtime::TrainingModel> tm;
      explicit Run(uint64_t init)
          : model((manual_seed(init),
                   nn::Sequential(nn::Linear(nn::LinearOptions(8, 16)), nn::ReLU(),
                                  nn::Dropout(0.5), nn::Linear(nn::LinearOptions(16, 4))))),
            sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9)) {}
    };
    auto make = [&](uint64_t init) {
      auto r = std::make_unique<Run>(init);
      if (device != "eager")
        r->tm.emplace(trainingModel(
            r->model.ptr(),
            Options().useIpuModel(device == "ipu").randomSeed(5).showCompilationProgressBar(false),
            r->sgd, ce));
      manual_seed(11);  // eager dropout draws from here on
      return r;
    };
    auto train = [&](Run& r, int from, int to) {
      for (int s = from; s < to; ++s) {
        if (r.tm) {
          (*r.tm)(xs[static_cast<size_t>(s)], ys[static_cast<size_t>(s)]);
          continue;
        }
        r.sgd.zero_grad();
        Tensor loss = ce(r.model(xs[static_cast<size_t>(s)]), ys[static_cast<size_t>(s)]);
        loss.backward();
        r.sgd.step();
      }
    };
    auto whole = make(1);
    train(*whole, 0, steps);

    auto first = make(1);
    train(*first, 0, cut);
    auto i64 = [](uint64_t v) { return full({}, static_cast<double>(v), kInt64); };
    const std::string path = dir.file(device + ".h5");
    io::save_checkpoint(path, *first->model, first->sgd.state_dict(), cut,
                        {{"rng_seed", i64(default_generator().seed())},
                         {"rng_position", i64(default_generator().position())},
                         {"run_counter", i64(first->tm ? first->tm->run_counter() : 0)}});

    auto resumed = make(2);  // other initial weights, another generator state
    nn::StateDict opt, training;
    CHECK(io::load_checkpoint(path, *resumed->model, &opt, &training) == cut);
    resumed->sgd.load_state_dict(opt);
    auto value = [&](const char* k) { return nn::find_in(training, k)->item<int64_t>(); };
    default_generator().manual_seed(static_cast<uint64_t>(value("rng_seed")));
    default_generator().set_position(static_cast<uint64_t>(value("rng_position")));
    if (resumed->tm) resumed->tm->set_run_counter(static_cast<uint64_t>(value("run_counter")));
    train(*resumed, cut, steps);

    const auto a = whole->model->state_dict(), b = resumed->model->state_dict();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].first);
      CHECK(a[i].second.to_vector<float>() == b[i].second.to_vector<float>());
    }
    // Without the run counter or the generator position the masks would differ: the check
    // can fail.
    auto again = make(2);
    io::load_checkpoint(path, *again->model, &opt);
    again->sgd.load_state_dict(opt);
    train(*again, cut, steps);
    CHECK(again->model->state_dict()[0].second.to_vector<float>() !=
          a[0].second.to_vector<float>());
  }
}

TEST_CASE("checkpoint saves remove temporaries of writers that died mid-save",
          "[hostile][checkpoint]") {
  testing::TempDir dir("ipuml_hostile_tmp");
  TwoLayer net;
  const std::string path = dir.file("ck.h5");
  const std::string dead = path + ".tmp-" + std::to_string(dead_pid());
  const std::string alive = path + ".tmp-1";  // init never dies: its file may be in use
  const std::string other = dir.file("other.h5.tmp-" + std::to_string(dead_pid()));
  for (const auto& p : {dead, alive, other}) std::ofstream(p) << "partial";
  io::save_checkpoint(path, net, {}, 1);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(alive));
  CHECK(fs::exists(other));  // another checkpoint's temporaries are its own business
  CHECK(io::read_checkpoint(path).step == 1);
}

#endif  // IPUML_WITH_HDF5
