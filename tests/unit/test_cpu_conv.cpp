// Tests of the CPU conv2d kernels (forward and the three gradients) against the naive reference,
// finite differences, every ISA path, and bit-identical results with 1 and 2 threads.
#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/conv_space_to_depth.hpp>
#include <ipuml/backends/cpu/conv_wgrad_1x1.hpp>
#include <ipuml/backends/cpu/conv_winograd.hpp>
#include <ipuml/backends/cpu/conv_winograd_wgrad.hpp>
#include <ipuml/core/error.hpp>

#include <catch2/catch.hpp>

#include "../support/cpu_isa.hpp"
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using ipuml::testing::IsaGuard;
using ipuml::testing::random_floats;
using ipuml::testing::supported_isas;

using ipuml::cpu::Conv2dParams;
using ipuml::cpu::Isa;

Conv2dParams make(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t kh,
                  int64_t kw, int64_t stride = 1, int64_t pad = 0, int64_t dil = 1,
                  int64_t groups = 1) {
  Conv2dParams p;
  p.n = n, p.c_in = c_in, p.h = h, p.w = w, p.c_out = c_out, p.kh = kh, p.kw = kw;
  p.stride_h = p.stride_w = stride, p.pad_h = p.pad_w = pad, p.dil_h = p.dil_w = dil;
  p.groups = groups;
  return p;
}

std::string describe(const Conv2dParams& p) {
  std::ostringstream os;
  os << "n=" << p.n << " c_in=" << p.c_in << " " << p.h << "x" << p.w << " c_out=" << p.c_out
     << " k=" << p.kh << "x" << p.kw << " stride=" << p.stride_h << "x" << p.stride_w
     << " pad=" << p.pad_h << "x" << p.pad_w << " dil=" << p.dil_h << "x" << p.dil_w
     << " groups=" << p.groups;
  return os.str();
}

std::vector<Conv2dParams> shapes() {
  std::vector<Conv2dParams> v = {
      make(2, 1, 28, 28, 32, 3, 3),               // MNIST conv1
      make(2, 32, 13, 13, 64, 3, 3),              // MNIST conv2
      make(2, 4, 1, 50, 30, 1, 4),                // conv1d as conv2d (Neuron-Inverter)
      make(1, 8, 12, 12, 16, 3, 3, 1, 1),         // ResNet 3x3 pad 1
      make(2, 16, 9, 9, 8, 1, 1),                 // pointwise
      make(2, 40, 16, 17, 24, 1, 1),              // pointwise, its operands read in place
      make(2, 16, 9, 9, 8, 1, 1, 2),              // strided 1x1 (downsample)
      make(1, 3, 23, 21, 8, 7, 7, 2, 3),          // ResNet stem
      make(2, 6, 10, 11, 9, 3, 3, 1, 1, 1, 3),    // groups
      make(1, 8, 9, 9, 8, 3, 3, 1, 1, 1, 8),      // depthwise
      make(2, 5, 12, 13, 7, 3, 3, 1, 2, 2),       // dilation
      make(1, 4, 11, 10, 6, 3, 2, 3, 1),          // stride 3, non-square kernel
      make(3, 2, 5, 5, 3, 5, 5),                  // output 1x1
      make(1, 35, 17, 19, 37, 3, 3, 2, 1, 1, 1),  // odd channel counts
  };
  // Strided with few channels: the stride-1 convolution of the space-to-depth input (the stem
  // above too), with kernels that do and do not divide by the stride, stride 3, and 2 x 1.
  v.push_back(make(2, 2, 10, 9, 5, 3, 3, 2, 1));
  v.push_back(make(1, 3, 12, 12, 6, 4, 4, 2, 1));
  v.push_back(make(1, 1, 14, 13, 4, 5, 5, 3, 2));
  Conv2dParams s2x1 = make(2, 4, 9, 8, 3, 3, 2);
  s2x1.stride_h = 2, s2x1.pad_h = 1;
  v.push_back(s2x1);
  Conv2dParams asym = make(2, 4, 7, 15, 5, 2, 3);
  asym.stride_h = 2, asym.stride_w = 1, asym.pad_h = 1, asym.pad_w = 2, asym.dil_w = 2;
  v.push_back(asym);
  // A strided 1x1 runs as a stride-1 1x1 over the gathered pixels: unequal strides that do not
  // divide the size, groups, and one deep enough for several k blocks.
  Conv2dParams s1x1 = make(2, 6, 10, 11, 9, 1, 1, 3, 0, 1, 3);
  s1x1.stride_w = 2;
  v.push_back(s1x1);
  v.push_back(make(1, 600, 7, 7, 20, 1, 1, 2));
  // Stride 1 with unequal padding and dilation per axis (the wide-GEMM path) ...
  Conv2dParams wide = make(2, 3, 9, 12, 5, 3, 2);
  wide.pad_h = 2, wide.pad_w = 1, wide.dil_h = 2;
  v.push_back(wide);
  v.push_back(make(1, 3, 6, 7, 4, 3, 3, 1, 3));   // ... padding past the kernel extent
  v.push_back(make(2, 5, 6, 5, 3, 1, 1, 1, 1));   // ... a padded 1x1
  v.push_back(make(1, 2, 3, 40, 3, 3, 3, 1, 1));  // ... rows wider than a panel
  // A reduction of at most 12 taps (AVX2: the taps in registers): MNIST's conv1, rows narrower
  // than a vector, dilation, a 1-D convolution and a padded one.
  v.push_back(make(2, 1, 28, 28, 32, 3, 3));
  v.push_back(make(3, 1, 6, 7, 5, 3, 3));
  v.push_back(make(1, 1, 12, 13, 4, 3, 3, 1, 2, 2));
  v.push_back(make(2, 3, 1, 50, 6, 1, 4));
  v.push_back(make(1, 1, 9, 10, 7, 3, 3, 1, 1));
  // Deep enough for the direct pixel kernels (AVX-512): a partial channel panel and rows split
  // into several tiles, groups, and a 1x1.
  v.push_back(make(2, 35, 9, 30, 37, 3, 3, 1, 1));
  v.push_back(make(1, 16, 7, 7, 12, 3, 3, 1, 1, 1, 2));
  v.push_back(make(1, 40, 6, 6, 20, 1, 1));
  // Strided with many channels (AVX-512): the pixel kernels over the phase images. ResNet's
  // 3x3/2 on odd and even sizes, a 5x5/2, stride 3, unequal strides, and two images.
  v.push_back(make(1, 24, 15, 14, 40, 3, 3, 2, 1));
  v.push_back(make(2, 20, 12, 12, 33, 3, 3, 2, 1));
  v.push_back(make(1, 8, 13, 11, 16, 5, 5, 2, 2));
  v.push_back(make(1, 6, 14, 16, 9, 3, 3, 3, 1));
  Conv2dParams s21 = make(1, 12, 11, 9, 20, 3, 3, 1, 1);
  s21.stride_h = 2;
  v.push_back(s21);
  // A few pixels under many output channels (ResNet-50's 7x7 and 14x14 maps at batch 1): too
  // few column panels to share, so threads split the row tiles too (a partial last tile here).
  v.push_back(make(1, 128, 7, 7, 300, 1, 1));
  v.push_back(make(1, 64, 14, 14, 100, 1, 1));
  // 1x1s on small maps with deep reductions (AVX-512): the pixel kernels over each map as one
  // row of pixels, forward (from 256 input channels), for the input gradient (from 256 output
  // channels), or both; partial channel panels, two images, groups, and a strided 1x1 whose
  // gathered pixels take that path.
  v.push_back(make(1, 260, 7, 7, 40, 1, 1));
  v.push_back(make(2, 300, 5, 6, 270, 1, 1));
  v.push_back(make(1, 512, 4, 4, 600, 1, 1, 1, 0, 1, 2));
  v.push_back(make(1, 300, 9, 9, 40, 1, 1, 2));
  // One image with many channel panels: each task packs the panel it runs (a 1x1, a 3x3 and a
  // strided 3x3).
  v.push_back(make(1, 256, 5, 5, 300, 1, 1));
  v.push_back(make(1, 20, 6, 7, 280, 3, 3, 1, 1));
  v.push_back(make(1, 24, 11, 11, 260, 3, 3, 2, 1));
  // A strided 1x1 whose compact input gradient runs flat, and a 1x1 whose weight gradient
  // (4 MiB) leaves the pixel kernels for the wide GEMM.
  v.push_back(make(2, 40, 10, 10, 300, 1, 1, 2));
  v.push_back(make(1, 1024, 2, 3, 1024, 1, 1));
  // Winograd F(2x2, 3x3) (3x3, stride 1, >= 48 channels both ways): odd outputs with padding 1,
  // padding 0 and 2, unequal padding, and enough tiles for five blocks (the weight gradient sums
  // across them, in four groups).
  v.push_back(make(2, 48, 7, 9, 50, 3, 3, 1, 1));
  v.push_back(make(1, 64, 6, 5, 48, 3, 3, 1, 0));
  v.push_back(make(1, 48, 5, 6, 64, 3, 3, 1, 2));
  Conv2dParams wino_asym = make(1, 56, 8, 7, 48, 3, 3);
  wino_asym.pad_h = 0, wino_asym.pad_w = 2;
  v.push_back(wino_asym);
  v.push_back(make(4, 48, 27, 27, 48, 3, 3, 1, 1));
  return v;
}

size_t x_size(const Conv2dParams& p) { return size_t(p.n * p.c_in * p.h * p.w); }
size_t w_size(const Conv2dParams& p) { return size_t(p.c_out * (p.c_in / p.groups) * p.kh * p.kw); }
size_t y_size(const Conv2dParams& p) { return size_t(p.n * p.c_out * p.out_h() * p.out_w()); }

// |got - want| within a tolerance that grows with the square root of the reduction length.
void check_close(const std::vector<float>& got, const std::vector<float>& want, double reduce_len) {
  REQUIRE(got.size() == want.size());
  const double tol = 2e-6 * (4.0 + std::sqrt(reduce_len));
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(double(got[i]) - double(want[i])) <= tol * (1.0 + std::abs(want[i])))) ++bad;
  CHECK(bad == 0);
}

// Runs p's passes (forward with bias, without, and with a batch norm's epilogue; the input
// gradient; with `wgrad` the weight gradient too) after set(false) and after set(true), checking
// on_path(on) before each: both runs must give the same bits, and the second the reference's
// values.
template <class Set, class OnPath>
void check_switch_keeps_bits(const Conv2dParams& p, std::mt19937& rng, const Set& set,
                             const OnPath& on_path, bool wgrad) {
  auto x = random_floats(x_size(p), rng), w = random_floats(w_size(p), rng);
  auto bias = random_floats(size_t(p.c_out), rng), dy = random_floats(y_size(p), rng);
  auto scale = random_floats(size_t(p.c_out), rng), shift = random_floats(size_t(p.c_out), rng);
  auto residual = random_floats(y_size(p), rng);
  const ipuml::cpu::ChannelAffine affine{scale.data(), shift.data(), residual.data(),
                                         true,         p.c_out,      p.out_h() * p.out_w()};
  const int outputs = wgrad ? 5 : 4;
  std::vector<float> out[2][5];
  for (int on = 0; on < 2; ++on) {
    set(on == 1);
    on_path(on == 1);
    for (auto& o : out[on]) o.assign(y_size(p), NAN);
    out[on][3].assign(x_size(p), NAN);
    out[on][4].assign(w_size(p), NAN);
    ipuml::cpu::conv2d_forward(p, x.data(), w.data(), bias.data(), out[on][0].data());
    ipuml::cpu::conv2d_forward(p, x.data(), w.data(), nullptr, out[on][1].data());
    ipuml::cpu::conv2d_forward(p, x.data(), w.data(), bias.data(), out[on][2].data(), &affine);
    ipuml::cpu::conv2d_backward_input(p, dy.data(), w.data(), out[on][3].data());
    if (wgrad) ipuml::cpu::conv2d_backward_weight(p, x.data(), dy.data(), out[on][4].data());
  }
  for (int i = 0; i < outputs; ++i) {
    INFO("output " << i);
    CHECK(std::memcmp(out[0][i].data(), out[1][i].data(), out[0][i].size() * sizeof(float)) == 0);
  }
  std::vector<float> y_ref(y_size(p)), dx_ref(x_size(p)), dw_ref(w_size(p));
  ipuml::cpu::conv2d_forward_reference(p, x.data(), w.data(), bias.data(), y_ref.data());
  check_close(out[1][0], y_ref, double(p.c_in / p.groups * p.kh * p.kw));
  ipuml::cpu::conv2d_backward_input_reference(p, dy.data(), w.data(), dx_ref.data());
  check_close(out[1][3], dx_ref, double(p.c_out / p.groups * p.kh * p.kw));
  if (wgrad) {
    ipuml::cpu::conv2d_backward_weight_reference(p, x.data(), dy.data(), dw_ref.data());
    check_close(out[1][4], dw_ref, double(p.n * p.out_h() * p.out_w()));
  }
}

}  // namespace

// Restores the Winograd switch on scope exit.
struct WinogradGuard {
  bool saved = ipuml::cpu::conv_winograd_enabled();
  ~WinogradGuard() { ipuml::cpu::set_conv_winograd(saved); }
};

// Makes AVX2 the active ISA with Winograd off (under an IsaGuard and a WinogradGuard); false
// where the CPU has no AVX2.
bool avx2_without_winograd() {
  const auto isas = supported_isas();
  if (std::find(isas.begin(), isas.end(), Isa::avx2) == isas.end()) return false;
  ipuml::cpu::set_gemm_isa(Isa::avx2);
  ipuml::cpu::set_conv_winograd(false);
  return true;
}

TEST_CASE("conv2d forward and gradients match the reference on every ISA", "[conv]") {
  IsaGuard guard;
  WinogradGuard wino_guard;
  const Isa isa = GENERATE(from_range(supported_isas()));
  const bool winograd = GENERATE(true, false);
  ipuml::cpu::set_gemm_isa(isa);
  ipuml::cpu::set_conv_winograd(winograd);
  std::mt19937 rng(5);
  for (const Conv2dParams& p : shapes()) {
    INFO("isa=" << ipuml::cpu::gemm_isa_name() << " winograd=" << winograd << " " << describe(p));
    auto x = random_floats(x_size(p), rng), w = random_floats(w_size(p), rng);
    auto bias = random_floats(size_t(p.c_out), rng), dy = random_floats(y_size(p), rng);
    const double k_fwd = double(p.c_in / p.groups * p.kh * p.kw);
    std::vector<float> y(y_size(p), NAN), y_ref(y_size(p));
    ipuml::cpu::conv2d_forward(p, x.data(), w.data(), bias.data(), y.data());
    ipuml::cpu::conv2d_forward_reference(p, x.data(), w.data(), bias.data(), y_ref.data());
    check_close(y, y_ref, k_fwd);
    std::fill(y.begin(), y.end(), NAN);
    ipuml::cpu::conv2d_forward(p, x.data(), w.data(), nullptr, y.data());
    ipuml::cpu::conv2d_forward_reference(p, x.data(), w.data(), nullptr, y_ref.data());
    check_close(y, y_ref, k_fwd);

    std::vector<float> dx(x_size(p), NAN), dx_ref(x_size(p));
    ipuml::cpu::conv2d_backward_input(p, dy.data(), w.data(), dx.data());
    ipuml::cpu::conv2d_backward_input_reference(p, dy.data(), w.data(), dx_ref.data());
    check_close(dx, dx_ref, double(p.c_out / p.groups * p.kh * p.kw));

    std::vector<float> dw(w_size(p), NAN), dw_ref(w_size(p));
    ipuml::cpu::conv2d_backward_weight(p, x.data(), dy.data(), dw.data());
    ipuml::cpu::conv2d_backward_weight_reference(p, x.data(), dy.data(), dw_ref.data());
    check_close(dw, dw_ref, double(p.n * p.out_h() * p.out_w()));

    std::vector<float> db(size_t(p.c_out), NAN), db_ref(size_t(p.c_out));
    ipuml::cpu::conv2d_backward_bias(p, dy.data(), db.data());
    ipuml::cpu::conv2d_backward_bias_reference(p, dy.data(), db_ref.data());
    check_close(db, db_ref, double(p.n * p.out_h() * p.out_w()));
  }
}

TEST_CASE("conv2d gradients agree with finite differences of the forward", "[conv]") {
  std::mt19937 rng(11);
  for (const Conv2dParams& p : {make(2, 4, 6, 7, 6, 3, 3, 2, 1, 1, 2), make(1, 3, 1, 12, 5, 1, 4),
                                make(1, 2, 7, 7, 3, 3, 3, 1, 2, 2)}) {
    INFO(describe(p));
    auto x = random_floats(x_size(p), rng), w = random_floats(w_size(p), rng);
    auto bias = random_floats(size_t(p.c_out), rng), r = random_floats(y_size(p), rng);
    // loss = sum(y * r), so dloss/dy = r.
    auto loss = [&](const std::vector<float>& xv, const std::vector<float>& wv,
                    const std::vector<float>& bv) {
      std::vector<float> y(y_size(p));
      ipuml::cpu::conv2d_forward(p, xv.data(), wv.data(), bv.data(), y.data());
      double s = 0.0;
      for (size_t i = 0; i < y.size(); ++i) s += double(y[i]) * double(r[i]);
      return s;
    };
    std::vector<float> dx(x_size(p)), dw(w_size(p)), db(size_t(p.c_out));
    ipuml::cpu::conv2d_backward_input(p, r.data(), w.data(), dx.data());
    ipuml::cpu::conv2d_backward_weight(p, x.data(), r.data(), dw.data());
    ipuml::cpu::conv2d_backward_bias(p, r.data(), db.data());
    const float eps = 1e-2f;
    auto numeric = [&](std::vector<float>& v, size_t i) {
      const float keep = v[i];
      v[i] = keep + eps;
      const double up = loss(x, w, bias);
      v[i] = keep - eps;
      const double down = loss(x, w, bias);
      v[i] = keep;
      return (up - down) / (2.0 * double(eps));
    };
    for (size_t i = 0; i < x.size(); i += 7) CHECK(dx[i] == Approx(numeric(x, i)).margin(2e-3));
    for (size_t i = 0; i < w.size(); i += 3) CHECK(dw[i] == Approx(numeric(w, i)).margin(2e-3));
    for (size_t i = 0; i < bias.size(); ++i) CHECK(db[i] == Approx(numeric(bias, i)).margin(2e-3));
  }
}

TEST_CASE("conv2d gives the same bits with 1 and 2 threads", "[conv]") {
  IsaGuard guard;
  const Isa isa = GENERATE(from_range(supported_isas()));
  ipuml::cpu::set_gemm_isa(isa);
  std::mt19937 rng(3);
  for (const Conv2dParams& p :
       {make(4, 16, 20, 20, 24, 3, 3, 1, 1), make(1, 32, 30, 30, 64, 3, 3, 1, 1),
        make(3, 4, 1, 400, 30, 1, 4), make(2, 8, 15, 15, 8, 3, 3, 2, 1, 1, 2),
        make(1, 64, 14, 14, 32, 1, 1), make(8, 32, 13, 13, 64, 3, 3),
        make(2, 64, 12, 11, 48, 3, 3, 1, 1), make(1, 128, 7, 7, 300, 1, 1),
        make(1, 64, 14, 14, 100, 1, 1), make(1, 96, 14, 14, 400, 1, 1, 2),
        make(1, 300, 7, 7, 280, 1, 1), make(2, 256, 14, 14, 64, 1, 1),
        make(1, 256, 20, 20, 64, 1, 1), make(4, 48, 16, 16, 160, 1, 1),
        // 7 panels of 32 channels: packed by the tasks on 1 thread, up front on 2.
        make(1, 40, 9, 9, 200, 3, 3, 1, 1), make(1, 40, 9, 9, 200, 3, 3, 2, 1),
        make(3, 40, 10, 10, 300, 1, 1, 2), make(1, 64, 15, 15, 100, 3, 3, 2, 1),
        make(3, 32, 12, 12, 40, 3, 3, 2, 1),
        // Winograd weight gradients summed in 3 groups of tile blocks (one after another, each
        // split over threads) and in 4 (a thread per group).
        make(1, 48, 40, 40, 48, 3, 3, 1, 1), make(2, 48, 32, 34, 48, 3, 3, 1, 1),
        make(2, 3, 40, 38, 16, 7, 7, 2, 3),
        // A few taps on AVX2: one image's rows split in bands on 2 threads, and three images.
        make(1, 1, 28, 28, 32, 3, 3), make(3, 1, 28, 28, 32, 3, 3, 1, 1)}) {
    INFO(describe(p));
    auto x = random_floats(x_size(p), rng), w = random_floats(w_size(p), rng);
    auto bias = random_floats(size_t(p.c_out), rng), dy = random_floats(y_size(p), rng);
    std::vector<float> out[2][4];
    for (int t = 0; t < 2; ++t) {
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(t + 1));
      out[t][0].resize(y_size(p));
      out[t][1].resize(x_size(p));
      out[t][2].resize(w_size(p));
      out[t][3].resize(size_t(p.c_out));
      ipuml::cpu::conv2d_forward(p, x.data(), w.data(), bias.data(), out[t][0].data());
      ipuml::cpu::conv2d_backward_input(p, dy.data(), w.data(), out[t][1].data());
      ipuml::cpu::conv2d_backward_weight(p, x.data(), dy.data(), out[t][2].data());
      ipuml::cpu::conv2d_backward_bias(p, dy.data(), out[t][3].data());
    }
    for (int i = 0; i < 4; ++i) {
      INFO("output " << i);
      CHECK(std::memcmp(out[0][i].data(), out[1][i].data(), out[0][i].size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("conv2d's Winograd switch changes the path, not the answer", "[conv]") {
  WinogradGuard wino_guard;
  const Conv2dParams p = make(2, 48, 9, 8, 64, 3, 3, 1, 1);
  std::mt19937 rng(9);
  auto x = random_floats(x_size(p), rng), w = random_floats(w_size(p), rng);
  auto dy = random_floats(y_size(p), rng);
  std::vector<float> out[2][3];
  for (int on = 0; on < 2; ++on) {
    ipuml::cpu::set_conv_winograd(on == 1);
    CHECK(ipuml::cpu::conv_winograd_enabled() == (on == 1));
    out[on][0].resize(y_size(p));
    out[on][1].resize(x_size(p));
    out[on][2].resize(w_size(p));
    ipuml::cpu::conv2d_forward(p, x.data(), w.data(), nullptr, out[on][0].data());
    ipuml::cpu::conv2d_backward_input(p, dy.data(), w.data(), out[on][1].data());
    ipuml::cpu::conv2d_backward_weight(p, x.data(), dy.data(), out[on][2].data());
  }
  for (int i = 0; i < 3; ++i) {
    INFO("output " << i);
    // Different arithmetic rounds differently somewhere, but both agree to float precision.
    CHECK(std::memcmp(out[0][i].data(), out[1][i].data(), out[0][i].size() * sizeof(float)) != 0);
    double worst = 0.0;
    for (size_t k = 0; k < out[0][i].size(); ++k)
      worst = std::max(worst, std::abs(double(out[0][i][k]) - double(out[1][i][k])) /
                                  (1.0 + std::abs(double(out[0][i][k]))));
    CHECK(worst < 1e-4);
  }
}

TEST_CASE("conv2d runs strided convolutions with few channels through space-to-depth", "[conv]") {
  using ipuml::cpu::detail::space_to_depth_applies;
  using ipuml::cpu::detail::space_to_depth_params;
  const Conv2dParams stem = make(4, 3, 224, 224, 64, 7, 7, 2, 3);
  REQUIRE(space_to_depth_applies(stem));
  const Conv2dParams q = space_to_depth_params(stem);
  CHECK(q.c_in == 12);
  CHECK(q.kh == 4);
  CHECK(q.kw == 4);
  CHECK(q.stride_h == 1);
  CHECK(q.pad_h == 0);
  CHECK(q.out_h() == stem.out_h());
  CHECK(q.out_w() == stem.out_w());
  // Many channels (ResNet's downsampling 1x1 and 3x3), dilation, groups, stride 1, and a kernel
  // narrower than the stride keep their own paths.
  CHECK_FALSE(space_to_depth_applies(make(4, 256, 56, 56, 512, 1, 1, 2)));
  CHECK_FALSE(space_to_depth_applies(make(4, 128, 56, 56, 128, 3, 3, 2, 1)));
  CHECK_FALSE(space_to_depth_applies(make(1, 3, 23, 21, 8, 3, 3, 2, 2, 2)));
  CHECK_FALSE(space_to_depth_applies(make(1, 4, 23, 21, 8, 3, 3, 2, 1, 1, 2)));
  CHECK_FALSE(space_to_depth_applies(make(1, 3, 23, 21, 8, 7, 7, 1, 3)));
  CHECK_FALSE(space_to_depth_applies(make(1, 4, 11, 10, 6, 3, 2, 3, 1)));
}

TEST_CASE("conv2d's forward leaves Winograd to the direct kernels where the weights dominate",
          "[conv]") {
  using ipuml::cpu::detail::winograd_pays;
  // Batch 1 on ResNet-50's layer3 (49 tiles) and layer4 (16 tiles): the direct kernels.
  CHECK_FALSE(winograd_pays(make(1, 256, 14, 14, 256, 3, 3, 1, 1)));
  CHECK_FALSE(winograd_pays(make(1, 512, 7, 7, 512, 3, 3, 1, 1)));
  CHECK_FALSE(winograd_pays(make(2, 512, 7, 7, 512, 3, 3, 1, 1)));
  // Enough tiles, or weights that fit a core's L2 (every Winograd shape of the tests): Winograd.
  CHECK(winograd_pays(make(4, 512, 7, 7, 512, 3, 3, 1, 1)));
  CHECK(winograd_pays(make(2, 256, 14, 14, 256, 3, 3, 1, 1)));
  CHECK(winograd_pays(make(1, 128, 28, 28, 128, 3, 3, 1, 1)));
  CHECK(winograd_pays(make(1, 64, 6, 5, 48, 3, 3, 1, 0)));
  CHECK(winograd_pays(make(2, 48, 9, 8, 64, 3, 3, 1, 1)));
}

TEST_CASE("conv2d takes Winograd only where its 32-bit tile tables reach", "[conv]") {
  Conv2dParams p = make(4, 64, 56, 56, 64, 3, 3, 1, 1);
  CHECK(ipuml::cpu::detail::winograd_applies(p));
  p.n = 200000;  // 40 G input floats: past int32 offsets, so the direct kernels take it
  CHECK_FALSE(ipuml::cpu::detail::winograd_applies(p));
  CHECK_FALSE(ipuml::cpu::detail::winograd_applies(make(4, 64, 56, 56, 64, 3, 3, 2, 1)));
  CHECK_FALSE(ipuml::cpu::detail::winograd_applies(make(4, 32, 13, 13, 64, 3, 3)));
}

TEST_CASE("conv2d rejects invalid parameters with ipuml::Error", "[conv]") {
  std::vector<float> buf(4096);
  Conv2dParams bad_groups = make(1, 6, 8, 8, 4, 3, 3, 1, 0, 1, 4);
  CHECK_THROWS_AS(
      ipuml::cpu::conv2d_forward(bad_groups, buf.data(), buf.data(), nullptr, buf.data()),
      ipuml::Error);
  Conv2dParams too_big = make(1, 1, 4, 4, 1, 5, 5);
  CHECK_THROWS_AS(ipuml::cpu::conv2d_backward_input(too_big, buf.data(), buf.data(), buf.data()),
                  ipuml::Error);
  Conv2dParams zero_stride = make(1, 1, 4, 4, 1, 3, 3, 0);
  CHECK_THROWS_AS(
      ipuml::cpu::conv2d_backward_weight(zero_stride, buf.data(), buf.data(), buf.data()),
      ipuml::Error);
}

// The AVX2 forms of the Winograd transforms (gathers in two halves, no scatter) against the
// portable ones, on the same layouts: the same bits everywhere they write, and nothing written
// where the portable ones write nothing. Tiles in odd maps and a block starting mid-row, so that
// groups cross rows and images and the last panel is half a group wide.
TEST_CASE("the AVX2 Winograd transforms give the portable transforms' bits", "[conv][winograd]") {
  namespace d = ipuml::cpu::detail;
  if (ipuml::cpu::detected_isa() < Isa::avx2) {
    WARN("no AVX2 on this CPU: only the portable transforms exist");
    return;
  }
  IsaGuard guard;
  const d::GemmConfig& cfg = d::config_for(Isa::avx2);
  std::mt19937 rng(31);
  // Maps 11 wide (groups of 16 tiles span rows) and 37 wide (a group can fill a row of tiles,
  // which the AVX2 output stores as two runs).
  for (int64_t pad : {0, 1, 2})
    for (int64_t w : {11, 37}) {
      const d::WinoShape s{2, 21, 9, w, 19, pad, pad};
      const int64_t T = s.tiles();
      for (int64_t t0 : {int64_t(0), int64_t(5)}) {
        INFO("width " << w << " pad " << pad << " tiles " << t0 << ".." << T);
        const int64_t nt = T - t0;
        auto x = random_floats(size_t(s.n * s.c * s.h * s.w), rng);
        const int64_t ys = s.n * s.m * s.oh() * s.ow();
        auto dy = random_floats(size_t(ys), rng);
        d::WinoTable tab;
        d::wino_table(s, t0, T, tab);
        // Input transform into the GEMM's panels (16 wide, 8 at the end).
        const d::WinoPanels lay{s.c, nt, cfg.nr(), cfg.vw};
        std::vector<float> v[2];
        // Output transform from the 16 products (m x ld each) into y.
        const int64_t ld = d::round_up(nt, 16);
        auto mq = random_floats(size_t(d::kWinoPos * s.m * ld), rng);
        std::vector<float> y[2];
        // Weight gradient: x's transform into V_q^T's panels, dy's into D_q's row tiles.
        const d::WinoPanels wlay{nt, s.c, cfg.nr(), cfg.vw};
        const d::WinoRowsA rows(cfg, s.m, nt);
        const int64_t vqs = wlay.size() + 16, dqs = rows.size() + 16;
        std::vector<float> wv[2], wd[2], dw[2];
        const int64_t groups = 2, per = d::kWinoPos * s.m * s.c;
        auto sums = random_floats(size_t(groups * per), rng);
        for (int i = 0; i < 2; ++i) {
          ipuml::cpu::set_gemm_isa(i == 0 ? Isa::avx2 : Isa::generic);
          v[i].assign(size_t(d::kWinoPos * lay.size()), -7.0f);
          d::wino_input_transform(s, tab, x.data(), 0, s.c, v[i].data(), lay);
          y[i].assign(size_t(ys), -7.0f);
          d::wino_output_transform(s, tab, mq.data(), ld, 0, s.m, nullptr, y[i].data());
          wv[i].assign(size_t(d::kWinoPos * vqs), -7.0f);
          d::wgrad_input_transform(s, t0, x.data(), 0, d::ceil_div(s.c, 16), wv[i].data(), vqs,
                                   wlay);
          wd[i].assign(size_t(d::kWinoPos * dqs), -7.0f);
          d::wgrad_dy_transform(s, t0, dy.data(), 0, d::ceil_div(s.m, 16), wd[i].data(), dqs, rows);
          dw[i].assign(size_t(s.m * s.c * 9), -7.0f);
          d::wino_wgrad_adjoint(s, sums.data(), groups, 0, s.m, dw[i].data());
        }
        CHECK(v[0] == v[1]);
        CHECK(y[0] == y[1]);
        CHECK(wv[0] == wv[1]);
        CHECK(wd[0] == wd[1]);
        CHECK(dw[0] == dw[1]);
        // A block of every tile writes every output.
        if (t0 == 0) CHECK(std::count(y[0].begin(), y[0].end(), -7.0f) == 0);
        if (w == 37 && t0 == 0) CHECK(tab.row_run[0] == 1);
      }
    }
}

TEST_CASE("AVX2's convolutions on small maps run transposed with the wide GEMM's bits", "[conv]") {
  IsaGuard guard;
  WinogradGuard wino_guard;
  if (!avx2_without_winograd()) return;  // no AVX2 here
  struct Restore {
    ~Restore() { ipuml::cpu::set_conv_transposed(true); }
  } restore;
  std::mt19937 rng(17);
  // 1x1s on 7x7 maps (any batch), 14x14 and 16x16 (256 pixels, the most taken) at batch 1,
  // whose product runs on every thread; 3 k blocks (AVX2's kc is 384), groups, a stride-2
  // shortcut (run on its compact map) and odd sizes; padded 3x3s (ResNet's on 7x7 and 14x14
  // maps), a dilated one, a 5x3 and a padded 1x1, on their column matrices; strided 3x3s onto 7x7
  // and 14x14 maps (the im2col GEMM's bits), an odd one, a strided dilated 5x5.
  for (const Conv2dParams& p :
       {make(3, 512, 7, 7, 2048, 1, 1), make(1, 1000, 7, 7, 40, 1, 1),
        make(1, 64, 14, 14, 256, 1, 1), make(2, 96, 5, 9, 80, 1, 1, 1, 0, 1, 2),
        make(1, 256, 14, 14, 512, 1, 1, 2), make(1, 32, 16, 16, 48, 1, 1),
        make(2, 17, 3, 5, 19, 1, 1), make(2, 128, 7, 7, 96, 3, 3, 1, 1),
        make(1, 64, 14, 14, 40, 3, 3, 1, 1), make(1, 24, 9, 8, 32, 3, 3, 1, 2, 2),
        make(2, 16, 8, 6, 24, 5, 3, 1, 1), make(1, 20, 6, 6, 24, 1, 1, 1, 1),
        make(2, 512, 14, 14, 512, 3, 3, 2, 1), make(1, 256, 28, 28, 256, 3, 3, 2, 1),
        make(2, 64, 13, 11, 48, 3, 3, 2, 1), make(1, 32, 17, 15, 40, 5, 5, 2, 3, 2)}) {
    INFO(describe(p));
    CHECK(ipuml::cpu::conv_runs_transposed(p));
    check_switch_keeps_bits(
        p, rng, [](bool on) { ipuml::cpu::set_conv_transposed(on); },
        [&](bool on) { CHECK(ipuml::cpu::conv_runs_transposed(p) == on); }, false);
  }
}

TEST_CASE("AVX2's pixel kernels give the wide GEMM's bits forward and back", "[conv]") {
  IsaGuard guard;
  WinogradGuard wino_guard;
  if (!avx2_without_winograd()) return;  // no AVX2 here
  struct Restore {
    ~Restore() { ipuml::cpu::set_conv_avx2_pixels(true); }
  } restore;
  using ipuml::cpu::ConvPath;
  std::mt19937 rng(23);
  // MNIST's conv2 (rows of 11 as tiles of 6 and 5); 360 and 378 deep (AVX2's kc is 384, the
  // deepest they take) over a partial second panel (8 channels: one 8-lane half) and a 4-channel
  // half; LeNet's 5x5; a 1-D kernel over 37 channels; dilation with padding past the kernel;
  // groups; rows of 13 (tiles of 5, 5, 3); one image, whose weight gradient splits its tiles
  // among the threads. The padded ones' input gradients run flipped, the others' as the GEMM
  // onto the taps at the real outputs and a masked gather. Weight gradients: the k blocks over 4
  // or 2 images' wide columns (several per image, or one across images).
  for (const Conv2dParams& p :
       {make(4, 32, 13, 13, 64, 3, 3), make(4, 40, 12, 12, 40, 3, 3, 1, 1),
        make(4, 42, 10, 11, 20, 3, 3, 1, 1), make(4, 6, 14, 14, 16, 5, 5),
        make(4, 12, 1, 90, 37, 1, 4), make(4, 8, 15, 17, 24, 3, 3, 1, 2, 2),
        make(2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 2), make(4, 40, 15, 15, 33, 3, 3),
        make(1, 16, 20, 20, 24, 3, 3, 1, 1)}) {
    INFO(describe(p));
    // At most 2 threads: with fewer images than 2 per thread small maps would run transposed.
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
    check_switch_keeps_bits(
        p, rng, [](bool on) { ipuml::cpu::set_conv_avx2_pixels(on); },
        [&](bool on) {
          CHECK(ipuml::cpu::conv_forward_path(p) == (on ? ConvPath::pixels : ConvPath::wide));
        },
        true);
  }
}

TEST_CASE("1x1 weight gradients read the wider operand in place with the packed GEMM's bits",
          "[conv]") {
  IsaGuard guard;
  const Isa isa = GENERATE(from_range(supported_isas()));
  ipuml::cpu::set_gemm_isa(isa);
  namespace d = ipuml::cpu::detail;
  const d::GemmConfig& cfg = d::config_for(isa);
  if (cfg.kern_direct[cfg.mr][1] == nullptr) return;  // the portable path has no direct kernels
  std::mt19937 rng(29);
  // dy wider than x (dW = dy x^T) and narrower (dW^T = x dy^T, transposed after); rows and
  // columns that leave partial tiles and panels; 3 k blocks (AVX2's kc is 384, AVX-512's 512);
  // several images, each its own product added in order.
  struct Case {
    int64_t m, c, P, nimg;
  };
  for (const Case cs : {Case{64, 256, 400, 1}, Case{256, 64, 400, 1}, Case{37, 21, 1100, 1},
                        Case{21, 37, 300, 3}, Case{100, 90, 256, 2}}) {
    INFO("m=" << cs.m << " c=" << cs.c << " P=" << cs.P << " images=" << cs.nimg);
    const auto x = random_floats(size_t(cs.nimg * cs.c * cs.P), rng);
    const auto dy = random_floats(size_t(cs.nimg * cs.m * cs.P), rng);
    for (const bool parallel : {false, true}) {
      std::vector<float> dw(size_t(cs.m * cs.c), NAN), want(dw.size(), NAN);
      REQUIRE(d::direct_wgrad_1x1(cfg, cs.nimg, cs.c, cs.m, cs.P, cs.c * cs.P, cs.m * cs.P,
                                  x.data(), dy.data(), dw.data(), parallel));
      for (int64_t img = 0; img < cs.nimg; ++img)
        d::run_gemm(cfg, cs.m, cs.c, cs.P, 1.0f,
                    d::PackRowMajorA{dy.data() + img * cs.m * cs.P, cs.P},
                    d::PackColMajorB{x.data() + img * cs.c * cs.P, cs.P}, img == 0 ? 0.0f : 1.0f,
                    want.data(), cs.c, false);
      CHECK(std::memcmp(dw.data(), want.data(), dw.size() * sizeof(float)) == 0);
      // And the values, against sums in double.
      size_t bad = 0;
      for (int64_t o = 0; o < cs.m; ++o)
        for (int64_t i = 0; i < cs.c; ++i) {
          double sum = 0.0;
          for (int64_t img = 0; img < cs.nimg; ++img)
            for (int64_t q = 0; q < cs.P; ++q)
              sum += double(dy[size_t((img * cs.m + o) * cs.P + q)]) *
                     double(x[size_t((img * cs.c + i) * cs.P + q)]);
          if (std::abs(dw[size_t(o * cs.c + i)] - sum) > 1e-4 * (1.0 + std::abs(sum))) ++bad;
        }
      CHECK(bad == 0);
    }
  }
  // Several shallow images (short k blocks) and a B too wide for L2 stay on the wide GEMM.
  std::vector<float> buf(size_t(2 * 300 * 300), 0.0f), dw(size_t(300 * 300));
  CHECK_FALSE(d::direct_wgrad_1x1(cfg, 2, 16, 16, 200, 16 * 200, 16 * 200, buf.data(), buf.data(),
                                  dw.data(), false));
  CHECK_FALSE(
      d::direct_wgrad_1x1(cfg, 1, 300, 300, 300, 0, 0, buf.data(), buf.data(), dw.data(), false));
}

TEST_CASE("conv2d_forward takes the path conv_forward_path names", "[conv]") {
  IsaGuard guard;
  WinogradGuard wino_guard;
  using ipuml::cpu::ConvPath;
  ipuml::cpu::set_conv_winograd(true);
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
  for (const Isa isa : supported_isas()) {
    ipuml::cpu::set_gemm_isa(isa);
    INFO("isa=" << ipuml::cpu::gemm_isa_name());
    const bool avx2 = isa == Isa::avx2, avx512 = isa == Isa::avx512;
    CHECK(ipuml::cpu::conv_forward_path(make(4, 64, 20, 20, 64, 3, 3, 1, 1)) == ConvPath::winograd);
    CHECK(ipuml::cpu::conv_forward_path(make(4, 3, 40, 40, 16, 7, 7, 2, 3)) ==
          ConvPath::space_to_depth);
    CHECK(ipuml::cpu::conv_forward_path(make(4, 16, 9, 9, 8, 1, 1, 2)) == ConvPath::gathered_1x1);
    CHECK(ipuml::cpu::conv_forward_path(make(4, 1, 28, 28, 32, 3, 3)) == (avx2 ? ConvPath::small_k
                                                                          : avx512
                                                                              ? ConvPath::pixels
                                                                              : ConvPath::wide));
    CHECK(ipuml::cpu::conv_forward_path(make(4, 32, 13, 13, 64, 3, 3)) ==
          (isa == Isa::generic ? ConvPath::wide : ConvPath::pixels));
    CHECK(ipuml::cpu::conv_forward_path(make(4, 44, 13, 13, 64, 3, 3)) ==  // 396 deep
          (avx512 ? ConvPath::pixels : ConvPath::wide));
    CHECK(ipuml::cpu::conv_forward_path(make(4, 512, 7, 7, 64, 1, 1)) ==
          (avx2     ? ConvPath::transposed
           : avx512 ? ConvPath::pixels
                    : ConvPath::wide));
    CHECK(ipuml::cpu::conv_forward_path(make(4, 64, 20, 20, 64, 3, 3, 2, 1)) ==
          (avx512 ? ConvPath::phase_pixels : ConvPath::im2col));
  }
}
