// Convolution forward + backward (input and weight gradients) through ipuml's ops at the
// model zoo's layer shapes; prints "ipuml conv layer=NAME threads=T ms=X" per layer.
// Usage: bench_conv [--threads T] [--seconds S] [--layer NAME ...]
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <ipuml/ipuml.hpp>

#include "conv_layers.hpp"
#include "timing.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ipuml convolution benchmark"};
  int threads = 1;
  double seconds = 1.0;
  app.add_option("--threads", threads, "oneTBB threads")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "time per layer");
  std::vector<std::string> only;
  app.add_option("--layer", only, "only these layers (names as printed; default all)");
  CLI11_PARSE(app, argc, argv);
  ipuml::set_num_threads(threads);
  using namespace ipuml;
  for (const auto& name : only) {
    const bool known = std::any_of(std::begin(kConvLayers), std::end(kConvLayers),
                                   [&](const auto& l) { return name == l.name; });
    if (!known) {
      std::fprintf(stderr, "bench_conv: no layer named '%s'\n", name.c_str());
      return 2;
    }
  }
  for (const auto& l : kConvLayers) {
    if (!only.empty() && std::find(only.begin(), only.end(), l.name) == only.end()) continue;
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
    std::printf("ipuml conv layer=%s threads=%d ms=%.3f\n", l.name, threads,
                1e3 * elapsed / static_cast<double>(reps));
  }
  return 0;
}
