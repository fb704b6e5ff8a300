// The CPU graph executor's Conv -> MaxPool fusion: a convolution hands each finished image to a
// consumer (conv2d_forward with a ConvImageSink) with the bits it would write, the fused op pools
// it from there with the two ops' bits, and the executor fuses a max pooling that alone reads a
// convolution's output (the MNIST CNN's two), gives that output no memory, and trains with the
// bits of the unfused graph.
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/graph_executor.hpp>
#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/ipuml.hpp>

#include "../support/cpu_isa.hpp"
#include "../support/error_of.hpp"
#include "../support/fusion_switch.hpp"

using namespace ipuml;
using Catch::Matchers::Contains;
using ipuml::testing::IsaGuard;
using ipuml::testing::random_floats;
using ipuml::testing::run_with_fusion;
using ipuml::testing::supported_isas;

namespace {

struct RestoreThreads {
  ~RestoreThreads() { set_num_threads(0); }
};

cpu::Conv2dParams conv(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t k,
                       int64_t stride = 1, int64_t pad = 0, int64_t groups = 1) {
  cpu::Conv2dParams p;
  p.n = n, p.c_in = c_in, p.h = h, p.w = w, p.c_out = c_out, p.kh = p.kw = k;
  p.stride_h = p.stride_w = stride, p.pad_h = p.pad_w = pad, p.groups = groups;
  return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// conv(1 -> 8, 3x3) -> max_pool(2) -> relu -> conv(8 -> 16, 3x3) -> max_pool(2) -> relu ->
// linear -> cross entropy, as the MNIST CNN (smaller), with a third convolution whose output is
// also read by something besides its pooling (it must not fuse).
struct CnnStep {
  Tensor w1, b1, w2, b2, w3, fc;
  ir::Trace trace;
  CnnStep() {
    Generator gen(7);
    w1 = mul(randn({8, 1, 3, 3}, &gen), 0.5).requires_grad_();
    b1 = mul(randn({8}, &gen), 0.1).requires_grad_();
    w2 = mul(randn({16, 8, 3, 3}, &gen), 0.2).requires_grad_();
    b2 = mul(randn({16}, &gen), 0.1).requires_grad_();
    w3 = mul(randn({4, 1, 3, 3}, &gen), 0.5).requires_grad_();
    fc = mul(randn({10, 16 * 5 * 5 + 4 * 13 * 13 + 1}, &gen), 0.05).requires_grad_();
    ir::Tracer tracer;
    Tensor x = tracer.input(ir::TensorMeta{{6, 1, 28, 28}, kFloat32}, "x");
    Tensor t = tracer.input(ir::TensorMeta{{6}, kInt64}, "t");
    Tensor h = relu(max_pool2d(conv2d(x, w1, b1), {2, 2}));
    h = relu(max_pool2d(conv2d(h, w2, b2), {2, 2}));
    Tensor side = conv2d(x, w3);  // pooled, and its mean read too
    Tensor pooled = max_pool2d(side, {2, 2});
    Tensor feats =
        cat({flatten(h, 1), flatten(pooled, 1), reshape(mean(side, {1, 2, 3}), {6, 1})}, 1);
    Tensor loss = cross_entropy(matmul(feats, fc.t()), t);
    loss.backward();
    trace = tracer.finish({loss, w1.grad(), b1.grad(), w2.grad(), b2.grad(), w3.grad(), fc.grad()});
  }
};

}  // namespace

TEST_CASE("a convolution hands each image to a sink with the bits it writes", "[conv][fusion]") {
  IsaGuard guard;
  RestoreThreads restore;
  std::mt19937 rng(3);
  // MNIST's conv1 and conv2 (whole images per task), few images (AVX2's few-tap kernels split
  // their rows), groups, a stride and padding (the paths that finish the output at once).
  const std::vector<cpu::Conv2dParams> shapes = {
      conv(8, 1, 28, 28, 32, 3),       conv(6, 32, 13, 13, 64, 3),
      conv(1, 1, 12, 11, 8, 3),        conv(3, 1, 9, 10, 5, 3, 1, 1),
      conv(4, 6, 9, 9, 9, 3, 1, 1, 3), conv(2, 5, 11, 12, 7, 3, 2, 1),
      conv(4, 48, 10, 10, 48, 3, 1, 1)};
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_gemm_isa(isa);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (const auto& p : shapes) {
        INFO(cpu::isa_name(isa) << ", " << threads << " threads, n=" << p.n << " c_in=" << p.c_in
                                << " " << p.h << "x" << p.w << " c_out=" << p.c_out
                                << " groups=" << p.groups << " stride=" << p.stride_h);
        const int64_t image = p.c_out * p.out_h() * p.out_w();
        auto x = random_floats(size_t(p.n * p.c_in * p.h * p.w), rng);
        auto w = random_floats(size_t(p.c_out * p.c_in / p.groups * p.kh * p.kw), rng);
        auto b = random_floats(size_t(p.c_out), rng);
        std::vector<float> want(size_t(p.n * image));
        cpu::conv2d_forward(p, x.data(), w.data(), b.data(), want.data());
        std::vector<float> got(want.size(), -1.0f);
        std::vector<std::atomic<int>> seen(size_t(p.n));
        cpu::conv2d_forward(p, x.data(), w.data(), b.data(),
                            cpu::ConvImageSink{[&](int64_t img, const float* out) {
                              seen[size_t(img)]++;
                              std::memcpy(got.data() + img * image, out, size_t(image) * 4);
                            }});
        for (auto& s : seen) CHECK(s.load() == 1);
        CHECK(same_bits(got, want));
      }
      // The MNIST CNN's two convolutions stream on the x86 paths (with 2 threads too).
      if (isa != cpu::Isa::generic) {
        CHECK(cpu::conv_forward_streams_images(conv(64, 1, 28, 28, 32, 3)));
        CHECK(cpu::conv_forward_streams_images(conv(64, 32, 13, 13, 64, 3)));
      }
      CHECK_FALSE(cpu::conv_forward_streams_images(conv(4, 6, 9, 9, 9, 3, 1, 1, 3)));
    }
  }
  CHECK_THAT(testing::error_of([] {
               const float v = 0.0f;
               cpu::conv2d_forward(conv(1, 1, 3, 3, 1, 3), &v, &v, nullptr, cpu::ConvImageSink{});
             }),
             Contains("no consumer"));
}

TEST_CASE("conv + max pool run as one op with the two ops' bits", "[conv][pool][fusion]") {
  IsaGuard guard;
  RestoreThreads restore;
  Generator gen(5);
  const Tensor x = randn({5, 3, 15, 14}, &gen), w = randn({6, 3, 3, 3}, &gen);
  const Tensor b = randn({6}, &gen);
  ir::Attrs ca, pa;
  ca.stride = {1, 1};
  ca.padding = {1, 1};
  ca.dilation = {1, 1};
  ca.groups = 1;
  const ir::TensorMeta ym{{5, 6, 15, 14}, kFloat32};
  for (auto [k, s] : {std::pair<int64_t, int64_t>{2, 2}, {3, 2}}) {
    pa.kernel = {k, k};
    pa.stride = {s, s};
    pa.padding = {0, 0};
    const int64_t oh = (15 - k) / s + 1, ow = (14 - k) / s + 1;
    const ir::TensorMeta pm{{5, 6, oh, ow}, kFloat32}, im{{5, 6, oh, ow}, kInt64};
    for (cpu::Isa isa : supported_isas()) {
      cpu::set_gemm_isa(isa);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        INFO(cpu::isa_name(isa) << ", " << threads << " threads, pool " << k << "/" << s);
        const std::vector<cpu::ConstBuffer> in{{x.raw_data(), {x.shape(), kFloat32}},
                                               {w.raw_data(), {w.shape(), kFloat32}},
                                               {b.raw_data(), {b.shape(), kFloat32}}};
        std::vector<float> y(size_t(ym.numel())), py(size_t(pm.numel())), fy(py.size(), -1.0f);
        std::vector<int64_t> pi(py.size()), fi(py.size(), -1);
        cpu::run_kernel(ir::OpKind::Conv, ca, in, {{y.data(), ym}});
        cpu::run_kernel(ir::OpKind::MaxPool, pa, {{y.data(), ym}},
                        {{py.data(), pm}, {pi.data(), im}});
        cpu::run_conv_max_pool(ca, in, pa, {{fy.data(), pm}, {fi.data(), im}});
        CHECK(same_bits(fy, py));
        CHECK(fi == pi);
        // Bad outputs: named, nothing run.
        std::vector<float> small(py.size() - 1);
        CHECK_THAT(testing::error_of([&] {
                     cpu::run_conv_max_pool(ca, in, pa,
                                            {{small.data(), {{5, 6, oh, ow - 1}, kFloat32}},
                                             {fi.data(), {{5, 6, oh, ow - 1}, kInt64}}});
                   }),
                   Contains("max_pool2d") && Contains("output spatial size"));
        CHECK_THAT(testing::error_of([&] {
                     cpu::run_conv_max_pool(ca, in, pa, {{fy.data(), pm}, {fy.data(), pm}});
                   }),
                   Contains("(float32, int64) outputs"));
        CHECK_THAT(testing::error_of([&] {
                     cpu::run_conv_max_pool(
                         ca, in, pa, {{const_cast<void*>(x.raw_data()), pm}, {fi.data(), im}});
                   }),
                   Contains("apart from the inputs"));
      }
    }
  }
}

TEST_CASE("the CPU executor pools a convolution's images from cache with the same bits",
          "[graph][fusion][determinism]") {
  IsaGuard guard;
  RestoreThreads restore;
  const CnnStep step;
  const auto& g = step.trace.graph;
  const auto f = cpu::fuse_conv_max_pool(g);
  int pairs = 0;
  for (size_t m = 0; m < g.nodes.size(); ++m)
    if (f.conv_node[m] >= 0) {
      ++pairs;
      CHECK(g.nodes[m].kind == ir::OpKind::MaxPool);
      CHECK(g.nodes[size_t(f.conv_node[m])].kind == ir::OpKind::Conv);
      CHECK(f.runs_at[size_t(f.conv_node[m])] == int64_t(m));
    }
  CHECK(pairs == 2);  // not the convolution whose output the mean reads too
  {
    ::setenv("IPUML_CPU_FUSION", "0", 1);
    const auto off = cpu::fuse_conv_max_pool(g);
    ::unsetenv("IPUML_CPU_FUSION");
    for (auto c : off.conv_node) CHECK(c == -1);
  }
  // The fused convolutions' outputs get no memory.
  cpu::GraphExecutor exe(g);
  for (size_t m = 0; m < g.nodes.size(); ++m)
    if (f.conv_node[m] >= 0) CHECK(exe.plan().offset[g.nodes[m].inputs[0]] == -1);

  Generator gen(2);
  const Tensor x = randn({6, 1, 28, 28}, &gen);
  const Tensor t = randint(0, 10, {6}, &gen);
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_gemm_isa(isa);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      INFO(cpu::isa_name(isa) << ", " << threads << " threads");
      const auto a = run_with_fusion(step.trace, true, {x, t});
      const auto b = run_with_fusion(step.trace, false, {x, t});
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        INFO("output " << i);
        CHECK(same_bits(a[i].to_vector<float>(), b[i].to_vector<float>()));
      }
    }
  }
}
