// max_pool2d and its backward through cpu::run_kernel against straightforward loops written here,
// bit for bit, on every ISA path: geometries (kernel, stride, padding, narrow and wide rows), ties,
// NaNs, -inf and -0, thread-count independence, and bad indices in the backward; the dedicated
// 2x2 stride-2 paths (forward, and the backward that writes dx once) at their edges.
#include <catch2/catch.hpp>

#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/core/dtype.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/ir/op_catalogue.hpp>

#include "../support/cpu_isa.hpp"
#include <tbb/global_control.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace ipuml;
using ipuml::testing::IsaGuard;
using ipuml::testing::supported_isas;
using ir::Attrs;
using ir::OpKind;

namespace {

struct Geom {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
  int64_t oh() const { return ir::window_out_size(h, kh, sh, ph); }
  int64_t ow() const { return ir::window_out_size(w, kw, sw, pw); }
  Attrs attrs() const {
    Attrs a;
    a.kernel = {kh, kw};
    a.stride = {sh, sw};
    a.padding = {ph, pw};
    return a;
  }
  std::string str() const {
    std::ostringstream os;
    os << n << "x" << c << "x" << h << "x" << w << " kernel " << kh << "x" << kw << " stride " << sh
       << "x" << sw << " padding " << ph << "x" << pw;
    return os.str();
  }
};

// Distinct NaN payloads, so that the test sees which NaN of a window comes out.
const float kNanA = std::bit_cast<float>(0x7fc00001u);
const float kNanB = std::bit_cast<float>(0xffc00002u);
const float kInf = std::numeric_limits<float>::infinity();

// Few distinct values (ties everywhere), -0 and +0, NaNs and -inf; some planes all -inf.
std::vector<float> pool_input(const Geom& g, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(g.n * g.c * g.h * g.w));
  for (auto& v : x) {
    const unsigned r = rng() % 40;
    v = r == 0 ? kNanA : r == 1 ? kNanB : r < 5 ? -kInf : r < 7 ? -0.0f : float(int(rng() % 4) - 1);
  }
  const size_t plane = static_cast<size_t>(g.h * g.w);
  if (rng() % 4 == 0 && x.size() >= plane)
    std::fill(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(plane), -kInf);
  return x;
}

// The rule stated directly: the first NaN of the window in row-major order if there is one, else
// the first element equal to the window's maximum (-inf included).
void reference_forward(const Geom& g, const std::vector<float>& x, std::vector<float>& y,
                       std::vector<int64_t>& ix) {
  const int64_t oh = g.oh(), ow = g.ow();
  y.assign(static_cast<size_t>(g.n * g.c * oh * ow), 0.0f);
  ix.assign(y.size(), -1);
  for (int64_t pl = 0; pl < g.n * g.c; ++pl)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        std::vector<int64_t> window;  // in-plane indices, row-major
        for (int64_t p = 0; p < g.kh; ++p)
          for (int64_t q = 0; q < g.kw; ++q) {
            const int64_t r = i * g.sh - g.ph + p, c = j * g.sw - g.pw + q;
            if (r >= 0 && r < g.h && c >= 0 && c < g.w) window.push_back(r * g.w + c);
          }
        REQUIRE(!window.empty());
        const float* xp = x.data() + pl * g.h * g.w;
        int64_t pick = -1;
        for (int64_t e : window)
          if (std::isnan(xp[e])) {
            pick = e;
            break;
          }
        if (pick < 0) {
          float mx = -kInf;
          for (int64_t e : window) mx = std::max(mx, xp[e]);
          for (int64_t e : window)
            if (xp[e] == mx) {
              pick = e;
              break;
            }
        }
        const size_t o = static_cast<size_t>((pl * oh + i) * ow + j);
        y[o] = xp[pick];
        ix[o] = pick;
      }
}

// Scatter-add per plane in output order.
std::vector<float> reference_backward(const Geom& g, const std::vector<float>& dy,
                                      const std::vector<int64_t>& ix) {
  const int64_t hw = g.h * g.w, ohw = g.oh() * g.ow();
  std::vector<float> dx(static_cast<size_t>(g.n * g.c * hw), 0.0f);
  for (int64_t pl = 0; pl < g.n * g.c; ++pl)
    for (int64_t j = 0; j < ohw; ++j)
      dx[static_cast<size_t>(pl * hw + ix[static_cast<size_t>(pl * ohw + j)])] +=
          dy[static_cast<size_t>(pl * ohw + j)];
  return dx;
}

// Outputs are written with 32 guard elements after them, which must stay as they were: the
// vector paths store whole vectors past a row's end where later outputs of the range follow.
constexpr size_t kGuard = 32;

void run_forward(const Geom& g, const std::vector<float>& x, std::vector<float>& y,
                 std::vector<int64_t>& ix) {
  const ir::TensorMeta xm{{g.n, g.c, g.h, g.w}, DType::Float32};
  const auto metas = ir::infer(OpKind::MaxPool, g.attrs(), {xm});
  REQUIRE(metas.size() == 2);
  REQUIRE(metas[0].shape == Shape{g.n, g.c, g.oh(), g.ow()});
  const size_t n = static_cast<size_t>(numel(metas[0].shape));
  y.assign(n + kGuard, 12345.0f);
  ix.assign(n + kGuard, -777);
  cpu::run_kernel(OpKind::MaxPool, g.attrs(), {{x.data(), xm}},
                  {{y.data(), metas[0]}, {ix.data(), metas[1]}});
  for (size_t i = n; i < n + kGuard; ++i) {
    REQUIRE(y[i] == 12345.0f);
    REQUIRE(ix[i] == -777);
  }
  y.resize(n);
  ix.resize(n);
}

std::vector<float> run_backward(const Geom& g, const std::vector<float>& dy,
                                const std::vector<int64_t>& ix) {
  Attrs a = g.attrs();
  a.shape = {g.n, g.c, g.h, g.w};
  const Shape ys{g.n, g.c, g.oh(), g.ow()};
  const size_t n = static_cast<size_t>(numel(a.shape));
  std::vector<float> dx(n + kGuard, 12345.0f);
  cpu::run_kernel(OpKind::MaxPoolBackward, a,
                  {{dy.data(), {ys, DType::Float32}}, {ix.data(), {ys, DType::Int64}}},
                  {{dx.data(), {a.shape, DType::Float32}}});
  for (size_t i = n; i < n + kGuard; ++i) REQUIRE(dx[i] == 12345.0f);
  dx.resize(n);
  return dx;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<Geom> geometries() {
  std::vector<Geom> out;
  const int64_t widths[] = {1, 2, 3, 5, 8, 13, 16, 17, 26, 41, 47, 70};
  const int64_t heights[] = {1, 4, 7};
  const int64_t strides[][2] = {{1, 1}, {2, 2}, {3, 3}, {1, 2}, {2, 1}, {3, 2}};
  const int64_t pads[][2] = {{0, 0}, {1, 1}, {0, 1}, {1, 0}};
  for (int64_t kh = 1; kh <= 3; ++kh)
    for (int64_t kw = 1; kw <= 3; ++kw)
      for (const auto& s : strides)
        for (const auto& p : pads)
          for (int64_t h : heights)
            for (int64_t w : widths) {
              const Geom g{1, 2, h, w, kh, kw, s[0], s[1], p[0], p[1]};
              if (2 * g.ph > g.kh || 2 * g.pw > g.kw || g.oh() <= 0 || g.ow() <= 0) continue;
              out.push_back(g);
            }
  return out;
}

}  // namespace

TEST_CASE("max_pool2d forward and backward match the reference bit for bit on every ISA",
          "[pool][kernels]") {
  IsaGuard guard;
  const cpu::Isa isa = GENERATE(from_range(supported_isas()));
  cpu::set_gemm_isa(isa);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const auto geoms = geometries();
  REQUIRE(geoms.size() > 1000);
  size_t failures = 0;
  for (const Geom& g : geoms) {
    const auto x = pool_input(g, rng);
    std::vector<float> y, y_ref;
    std::vector<int64_t> ix, ix_ref;
    run_forward(g, x, y, ix);
    reference_forward(g, x, y_ref, ix_ref);
    std::vector<float> dy(y.size());
    for (auto& v : dy) v = unit(rng);
    const bool ok_fwd = same_bits(y, y_ref) && ix == ix_ref;
    const bool ok_bwd = ok_fwd && same_bits(run_backward(g, dy, ix), reference_backward(g, dy, ix));
    if (!ok_fwd || !ok_bwd) {
      ++failures;
      if (failures <= 5)
        FAIL_CHECK("isa " << cpu::gemm_isa_name() << " " << g.str() << ": "
                          << (ok_fwd ? "backward" : "forward") << " differs");
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("max_pool2d picks the first NaN and the first maximum of each window", "[pool]") {
  IsaGuard guard;
  const cpu::Isa isa = GENERATE(from_range(supported_isas()));
  cpu::set_gemm_isa(isa);
  // One row of 40 windows of 2x2 (wide enough for the vector paths), stride 2.
  const Geom g{1, 1, 2, 80, 2, 2, 2, 2, 0, 0};
  std::vector<float> x(static_cast<size_t>(2 * 80), 1.0f);  // all ties: index of the first
  auto at = [&](int64_t r, int64_t c) -> float& { return x[static_cast<size_t>(r * 80 + c)]; };
  at(1, 2) = kNanA;  // window 1: NaN beats the later 1s and the earlier ones
  at(0, 5) = kNanB;  // window 2: the first NaN wins over a later one
  at(1, 4) = kNanA;
  at(1, 6) = 5.0f;  // window 3: a later larger value does not beat a NaN
  at(0, 7) = kNanA;
  at(0, 8) = -kInf;  // window 4: all -inf: -inf at the first element
  at(0, 9) = -kInf;
  at(1, 8) = -kInf;
  at(1, 9) = -kInf;
  at(0, 11) = 3.0f;  // window 5: maximum tied at (0, 11) and (1, 10): the first in row-major
  at(1, 10) = 3.0f;
  at(0, 12) = -0.0f;  // window 6: -0 and +0 tie: the first
  at(0, 13) = 0.0f;
  at(1, 12) = -1.0f;
  at(1, 13) = 0.0f;
  std::vector<float> y;
  std::vector<int64_t> ix;
  run_forward(g, x, y, ix);
  REQUIRE(ix.size() == 40);
  CHECK(ix[0] == 0);
  CHECK(std::bit_cast<uint32_t>(y[1]) == std::bit_cast<uint32_t>(kNanA));
  CHECK(ix[1] == 80 + 2);
  CHECK(std::bit_cast<uint32_t>(y[2]) == std::bit_cast<uint32_t>(kNanB));
  CHECK(ix[2] == 5);
  CHECK(std::bit_cast<uint32_t>(y[3]) == std::bit_cast<uint32_t>(kNanA));
  CHECK(ix[3] == 7);
  CHECK(y[4] == -kInf);
  CHECK(ix[4] == 8);
  CHECK(y[5] == 3.0f);
  CHECK(ix[5] == 11);
  CHECK(std::signbit(y[6]));
  CHECK(ix[6] == 12);
  for (size_t o = 7; o < 40; ++o) CHECK(ix[o] == static_cast<int64_t>(2 * o));
}

TEST_CASE("max_pool2d gives the same bits with 1 and 2 threads", "[pool]") {
  IsaGuard guard;
  const cpu::Isa isa = GENERATE(from_range(supported_isas()));
  cpu::set_gemm_isa(isa);
  std::mt19937 rng(7);
  for (const Geom& g :
       {Geom{8, 32, 26, 26, 2, 2, 2, 2, 0, 0}, Geom{4, 16, 33, 45, 3, 3, 2, 2, 1, 1},
        Geom{2, 64, 11, 11, 2, 2, 2, 2, 0, 0}}) {
    INFO(g.str());
    const auto x = pool_input(g, rng);
    std::vector<float> y[2], dx[2];
    std::vector<int64_t> ix[2];
    std::vector<float> dy(static_cast<size_t>(g.n * g.c * g.oh() * g.ow()));
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (auto& v : dy) v = unit(rng);
    for (int t = 0; t < 2; ++t) {
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(t + 1));
      run_forward(g, x, y[t], ix[t]);
      dx[t] = run_backward(g, dy, ix[t]);
    }
    CHECK(same_bits(y[0], y[1]));
    CHECK(ix[0] == ix[1]);
    CHECK(same_bits(dx[0], dx[1]));
  }
}

TEST_CASE("max_pool2d backward rejects out-of-range indices without writing out of bounds",
          "[pool]") {
  IsaGuard guard;
  const cpu::Isa isa = GENERATE(from_range(supported_isas()));
  cpu::set_gemm_isa(isa);
  const Geom g{2, 3, 4, 6, 2, 2, 2, 2, 0, 0};
  const int64_t hw = g.h * g.w, ohw = g.oh() * g.ow(), planes = g.n * g.c;
  const Shape ys{g.n, g.c, g.oh(), g.ow()};
  Attrs a = g.attrs();
  a.shape = {g.n, g.c, g.h, g.w};
  const std::vector<float> dy(static_cast<size_t>(planes * ohw), 1.0f);
  for (int64_t bad : {hw, hw + 1000, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    INFO(cpu::gemm_isa_name() << " bad index " << bad);
    // Each index the top left of its 2x2 block (the block path's case) but one of plane 3.
    std::vector<int64_t> ix(static_cast<size_t>(planes * ohw));
    for (int64_t o = 0; o < planes * ohw; ++o)
      ix[static_cast<size_t>(o)] = 2 * (o % ohw / g.ow()) * g.w + 2 * (o % g.ow());
    ix[static_cast<size_t>(3 * ohw + 2)] = bad;
    // The output sits between guard values that must survive.
    const size_t guard = 4096;
    std::vector<float> buf(static_cast<size_t>(planes * hw) + 2 * guard, 777.0f);
    float* dx = buf.data() + guard;
    try {
      cpu::run_kernel(OpKind::MaxPoolBackward, a,
                      {{dy.data(), {ys, DType::Float32}}, {ix.data(), {ys, DType::Int64}}},
                      {{dx, {a.shape, DType::Float32}}});
      FAIL("expected ipuml::Error");
    } catch (const Error& e) {
      const std::string msg = e.what();
      CHECK(msg.find("max_pool2d_backward") != std::string::npos);
      CHECK(msg.find("out of range") != std::string::npos);
      CHECK(msg.find(std::to_string(bad)) != std::string::npos);
    }
    for (size_t i = 0; i < guard; ++i) {
      REQUIRE(buf[i] == 777.0f);
      REQUIRE(buf[buf.size() - 1 - i] == 777.0f);
    }
  }
}

// The 2x2 stride-2 paths: rows of outputs one or two to a vector, masked row ends, odd leftover
// rows and columns, planes of one output, the MNIST CNN's shapes; special values everywhere.
TEST_CASE("max_pool2d 2x2 stride 2 matches the reference bit for bit on every ISA", "[pool]") {
  IsaGuard guard;
  const cpu::Isa isa = GENERATE(from_range(supported_isas()));
  cpu::set_gemm_isa(isa);
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<Geom> geoms;
  for (int64_t h : {2, 3, 4, 5, 11, 26})
    for (int64_t w : {2, 3, 4, 5, 8, 9, 10, 11, 15, 16, 17, 18, 26, 33, 34, 35, 64, 70})
      geoms.push_back({2, 3, h, w, 2, 2, 2, 2, 0, 0});
  geoms.push_back({4, 32, 26, 26, 2, 2, 2, 2, 0, 0});
  geoms.push_back({4, 64, 11, 11, 2, 2, 2, 2, 0, 0});
  for (const Geom& g : geoms) {
    INFO(cpu::gemm_isa_name() << " " << g.str());
    const auto x = pool_input(g, rng);
    std::vector<float> y, y_ref;
    std::vector<int64_t> ix, ix_ref;
    run_forward(g, x, y, ix);
    reference_forward(g, x, y_ref, ix_ref);
    REQUIRE(same_bits(y, y_ref));
    REQUIRE(ix == ix_ref);
    // dy with -0 and NaN too: the backward writes 0 + dy, as the scatter-add does.
    std::vector<float> dy(y.size());
    for (auto& v : dy) {
      const unsigned r = rng() % 16;
      v = r == 0 ? -0.0f : r == 1 ? kNanB : unit(rng);
    }
    REQUIRE(same_bits(run_backward(g, dy, ix), reference_backward(g, dy, ix)));
  }
}

// Indices that the 2x2 stride-2 shapes allow but that are not in their own 2x2 block (from another
// pooling, or a repeat of one element) take the general scatter-add: overlapping terms add.
TEST_CASE("max_pool2d backward adds indices outside their 2x2 block on every ISA", "[pool]") {
  IsaGuard guard;
  const cpu::Isa isa = GENERATE(from_range(supported_isas()));
  cpu::set_gemm_isa(isa);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (const Geom& g : {Geom{2, 3, 11, 11, 2, 2, 2, 2, 0, 0}, Geom{2, 3, 26, 26, 2, 2, 2, 2, 0, 0},
                        Geom{1, 2, 7, 37, 2, 2, 2, 2, 0, 0}}) {
    INFO(cpu::gemm_isa_name() << " " << g.str());
    const int64_t hw = g.h * g.w, ohw = g.oh() * g.ow(), planes = g.n * g.c;
    std::vector<int64_t> ix(static_cast<size_t>(planes * ohw));
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t i = 0; i < g.oh(); ++i)
        for (int64_t j = 0; j < g.ow(); ++j)
          ix[static_cast<size_t>((pl * g.oh() + i) * g.ow() + j)] =
              (2 * i + rng() % 2) * g.w + 2 * j + rng() % 2;
    // Plane 0 keeps its blocks; in each other plane one index leaves its block: to the next
    // block, to the last element of the plane (a column or row no window covers when w or h is
    // odd), or onto its neighbour's element.
    for (int64_t pl = 1; pl < planes; ++pl) {
      const size_t o = static_cast<size_t>(pl * ohw + static_cast<int64_t>(rng() % ohw));
      const int64_t kind = pl % 3;
      ix[o] = kind == 0   ? (ix[o] + 2) % hw
              : kind == 1 ? hw - 1
                          : ix[o == static_cast<size_t>(pl * ohw) ? o + 1 : o - 1];
    }
    std::vector<float> dy(static_cast<size_t>(planes * ohw));
    for (auto& v : dy) v = unit(rng);
    CHECK(same_bits(run_backward(g, dy, ix), reference_backward(g, dy, ix)));
  }
}
