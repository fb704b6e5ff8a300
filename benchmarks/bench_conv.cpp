// Convolution forward + backward (input and weight gradients) through ipuml's ops at the
// model zoo's layer shapes; prints "ipuml conv layer=NAME threads=T ms=X" per layer.
// Usage: bench_conv [--threads T] [--seconds S] [--layer NAME ...] [--shape N,C,H,W,CO,K,S,P ...]
//                   [--passes]
// --shape adds 2-d layers of its own (named shape_N_C_H_W_CO_K_S_P); --passes times the CPU
// kernels' three passes alone instead (conv2d_forward, _backward_input, _backward_weight), one
// line each with its GFLOP/s.
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/ipuml.hpp>

#include "conv_layers.hpp"
#include "timing.hpp"

namespace {

struct NamedLayer {
  std::string name;
  ConvLayer l;
};

// "N,C,H,W,CO,K,S,P" as a 2-d layer, or false.
bool parse_shape(const std::string& text, NamedLayer& out) {
  std::vector<int64_t> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      v.push_back(std::stoll(item, &used));
      if (used != item.size()) return false;
    } catch (const std::exception&) {
      return false;
    }
  }
  if (v.size() != 8 || std::any_of(v.begin(), v.begin() + 7, [](int64_t x) { return x <= 0; }) ||
      v[7] < 0)
    return false;
  out.name = "shape";
  for (int64_t x : v) out.name += "_" + std::to_string(x);
  out.l = ConvLayer{nullptr, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], false};
  return true;
}

// The three passes of a 2-d layer through the CPU kernels, each timed alone.
void time_passes(const NamedLayer& nl, int threads, double seconds) {
  using namespace ipuml;
  const ConvLayer& l = nl.l;
  cpu::Conv2dParams p;
  p.n = l.n, p.c_in = l.c_in, p.h = l.one_d ? 1 : l.h, p.w = l.w, p.c_out = l.c_out;
  p.kh = l.one_d ? 1 : l.k, p.kw = l.k;
  p.stride_h = l.one_d ? 1 : l.stride, p.stride_w = l.stride;
  p.pad_h = l.one_d ? 0 : l.pad, p.pad_w = l.pad;
  const int64_t ysize = p.n * p.c_out * p.out_h() * p.out_w();
  const int64_t xsize = p.n * p.c_in * p.h * p.w, wsize = p.c_out * p.c_in * p.kh * p.kw;
  const Tensor x = randn(Shape{xsize}), w = randn(Shape{wsize}), dy = randn(Shape{ysize});
  std::vector<float> y(static_cast<size_t>(ysize)), dx(static_cast<size_t>(xsize)),
      dw(static_cast<size_t>(wsize));
  const double flops = 2.0 * double(ysize) * double(p.c_in * p.kh * p.kw);
  const float* xd = x.data_ptr<float>();
  const float* wd = w.data_ptr<float>();
  const float* dyd = dy.data_ptr<float>();
  const auto report = [&](const char* pass, auto&& f) {
    int64_t reps = 0;
    const double s = time_repeated(f, seconds, reps) / double(reps);
    std::printf("ipuml conv layer=%s threads=%d pass=%s ms=%.3f gflops=%.1f\n", nl.name.c_str(),
                threads, pass, 1e3 * s, flops / s * 1e-9);
  };
  report("forward", [&] { cpu::conv2d_forward(p, xd, wd, nullptr, y.data()); });
  report("input_grad", [&] { cpu::conv2d_backward_input(p, dyd, wd, dx.data()); });
  report("weight_grad", [&] { cpu::conv2d_backward_weight(p, xd, dyd, dw.data()); });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ipuml convolution benchmark"};
  int threads = 1;
  double seconds = 1.0;
  bool passes = false;
  app.add_option("--threads", threads, "oneTBB threads")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "time per layer (per pass with --passes)");
  std::vector<std::string> only, shapes;
  app.add_option("--layer", only, "only these layers (names as printed; default all)");
  app.add_option("--shape", shapes,
                 "2-d layers of your own, each N,C,H,W,CO,K,S,P (batch, input channels, height, "
                 "width, output channels, kernel, stride, padding); only these unless --layer");
  app.add_flag("--passes", passes, "time the forward, input- and weight-gradient kernels alone");
  CLI11_PARSE(app, argc, argv);
  ipuml::set_num_threads(threads);
  using namespace ipuml;
  std::vector<NamedLayer> layers;
  for (const auto& text : shapes) {
    NamedLayer nl;
    if (!parse_shape(text, nl)) {
      std::fprintf(stderr, "bench_conv: --shape '%s' is not N,C,H,W,CO,K,S,P (positive, P >= 0)\n",
                   text.c_str());
      return 2;
    }
    layers.push_back(nl);
  }
  for (const auto& name : only) {
    const bool known = std::any_of(std::begin(kConvLayers), std::end(kConvLayers),
                                   [&](const auto& l) { return name == l.name; });
    if (!known) {
      std::fprintf(stderr, "bench_conv: no layer named '%s'\n", name.c_str());
      return 2;
    }
  }
  if (shapes.empty() || !only.empty())
    for (const auto& l : kConvLayers)
      if (only.empty() || std::find(only.begin(), only.end(), l.name) != only.end())
        layers.push_back({l.name, l});
  for (const auto& nl : layers) {
    const ConvLayer& l = nl.l;
    if (passes) {
      time_passes(nl, threads, seconds);
      continue;
    }
    Tensor x =
        (l.one_d ? randn({l.n, l.c_in, l.w}) : randn({l.n, l.c_in, l.h, l.w})).requires_grad_();
    Tensor w = (l.one_d ? randn({l.c_out, l.c_in, l.k}) : randn({l.c_out, l.c_in, l.k, l.k}))
                   .requires_grad_();
    auto step = [&] {
      x.set_grad(Tensor());
      w.set_grad(Tensor());
      Tensor y = l.one_d ? conv1d(x, w, Tensor(), l.stride, l.pad)
                         : conv2d(x, w, Tensor(), {l.stride, l.stride}, {l.pad, l.pad});
      y.backward(ones_like(y));
    };
    int64_t reps = 0;
    const double elapsed = time_repeated(step, seconds, reps);
    std::printf("ipuml conv layer=%s threads=%d ms=%.3f\n", nl.name.c_str(), threads,
                1e3 * elapsed / static_cast<double>(reps));
  }
  return 0;
}
