// The CPU graph executor's Conv -> BatchNormInference fusion: the batch norm's pass (with its
// residual and ReLU) runs on each piece of the convolution's output as it is finished, on every
// convolution path, with the same bits as eager mode's two ops; which pairs fuse, the memory
// plan that gives the batch norm's output its convolution's block, and the shared AVX-512 pass.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/cpu_features.hpp>
#include <ipuml/backends/cpu/graph_executor.hpp>
#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/resnet.hpp>

#include "../support/error_of.hpp"

using namespace ipuml;
using Catch::Matchers::Contains;

namespace {

struct RestoreThreadsAndIsa {
  cpu::Isa isa = cpu::active_isa();
  ~RestoreThreadsAndIsa() {
    set_num_threads(0);
    cpu::set_gemm_isa(isa);
  }
};

// IPUML_CPU_FUSION set for the scope (unset: nullptr), restored after.
struct FusionEnv {
  std::string saved;
  bool had;
  explicit FusionEnv(const char* value) {
    const char* old = std::getenv("IPUML_CPU_FUSION");
    had = old != nullptr;
    if (had) saved = old;
    if (value)
      setenv("IPUML_CPU_FUSION", value, 1);
    else
      unsetenv("IPUML_CPU_FUSION");
  }
  ~FusionEnv() {
    if (had)
      setenv("IPUML_CPU_FUSION", saved.c_str(), 1);
    else
      unsetenv("IPUML_CPU_FUSION");
  }
};

void require_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  INFO(what);
  REQUIRE(a.shape() == b.shape());
  auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  REQUIRE(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0);
}

int fused_pairs(const std::vector<int64_t>& fused) {
  int n = 0;
  for (auto f : fused) n += f >= 0;
  return n;
}

// One convolution and its batch norm; each case sends the convolution down another path.
struct Case {
  const char* name;
  int64_t n, c_in, h, w, c_out, k, stride, pad, groups;
  bool bias, residual, relu;
};

const Case kCases[] = {
    {"winograd 3x3", 1, 48, 16, 16, 48, 3, 1, 1, 1, false, true, true},
    {"pixel kernels 3x3, prepacked", 2, 16, 9, 11, 40, 3, 1, 1, 1, true, false, true},
    {"pixel kernels 3x3, packed in the tasks", 1, 16, 7, 7, 256, 3, 1, 1, 1, false, true, false},
    {"flat 1x1 on the pixel kernels", 1, 256, 6, 5, 40, 1, 1, 0, 1, false, true, true},
    {"wide GEMM 1x1", 2, 24, 9, 9, 20, 1, 1, 0, 1, true, true, true},
    {"wide GEMM 1x1 padded (C in scratch)", 1, 24, 5, 6, 20, 1, 1, 1, 1, false, false, false},
    {"strided 3x3 over phase images", 1, 16, 13, 12, 24, 3, 2, 1, 1, false, true, true},
    {"space to depth 7x7/2 stem", 2, 3, 20, 18, 16, 7, 2, 3, 1, false, false, true},
    {"strided 1x1 on the gathered pixels", 1, 24, 10, 10, 32, 1, 2, 0, 1, false, true, false},
    {"strided grouped im2col GEMM", 2, 8, 9, 9, 8, 3, 2, 1, 2, true, true, true},
    {"grouped stride 1", 1, 8, 8, 8, 12, 3, 1, 1, 2, false, true, true},
    {"few taps in registers (AVX2)", 2, 1, 12, 13, 8, 3, 1, 1, 1, true, true, true},
    {"few taps on rows narrower than a vector (AVX2)", 1, 1, 6, 6, 5, 3, 1, 0, 1, false, false,
     true},
};

struct Net {
  Case c;
  Tensor w, b, mean, var, gamma, beta;
  Net(const Case& cs, Generator& g) : c(cs) {
    w = mul(randn({c.c_out, c.c_in / c.groups, c.k, c.k}, &g), 0.2);
    if (c.bias) b = randn({c.c_out}, &g);
    mean = randn({c.c_out}, &g);
    var = add(rand({c.c_out}, &g), 0.5);
    gamma = randn({c.c_out}, &g);
    beta = randn({c.c_out}, &g);
  }
  Tensor operator()(const Tensor& x, const Tensor& r) const {
    NoGradGuard no_grad;
    Tensor y = conv2d(x, w, b, {c.stride, c.stride}, {c.pad, c.pad}, {1, 1}, c.groups);
    return batch_norm_act(y, mean, var, gamma, beta, false, 0.1, 1e-3, r, c.relu);
  }
  Shape out_shape() const {
    const int64_t oh = (c.h + 2 * c.pad - c.k) / c.stride + 1;
    const int64_t ow = (c.w + 2 * c.pad - c.k) / c.stride + 1;
    return {c.n, c.c_out, oh, ow};
  }
};

}  // namespace

TEST_CASE("conv + batch norm inference fuse in the CPU graph with eager's bits on every path",
          "[conv][batchnorm][fusion][determinism]") {
  RestoreThreadsAndIsa restore;
  std::vector<cpu::Isa> isas{cpu::Isa::generic};
  if (cpu::detected_isa() == cpu::Isa::avx512) isas.push_back(cpu::Isa::avx2);
  if (cpu::detected_isa() != cpu::Isa::generic) isas.push_back(cpu::detected_isa());
  for (const auto& cs : kCases) {
    Generator g(17);
    const Net net(cs, g);
    Tensor x = randn({cs.n, cs.c_in, cs.h, cs.w}, &g);
    Tensor r = cs.residual ? randn(net.out_shape(), &g) : Tensor();
    for (auto isa : isas) {
      cpu::set_gemm_isa(isa);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        INFO(cs.name << ", " << cpu::isa_name(isa) << ", " << threads << " threads");
        const Tensor want = net(x, r);
        ir::Tracer tracer;
        Tensor xs = tracer.input(x, "x");
        Tensor rs = cs.residual ? tracer.input(r, "r") : Tensor();
        auto trace = tracer.finish({net(xs, rs)});
        const auto fused = cpu::fuse_conv_batch_norm(trace.graph);
        REQUIRE(fused_pairs(fused) == 1);
        std::vector<Tensor> inputs{x};
        if (cs.residual) inputs.push_back(r);
        cpu::GraphExecutor exe(trace.graph);
        require_same_bits(exe.run(inputs, trace.states)[0], want, "fused");
        // The fused batch norm's output is computed in its convolution's block.
        for (size_t n = 0; n < fused.size(); ++n)
          if (fused[n] >= 0) {
            const auto& bn = trace.graph.nodes[size_t(fused[n])];
            CHECK(exe.plan().offset[bn.outputs[0]] == exe.plan().offset[bn.inputs[0]]);
          }
        FusionEnv off("0");
        CHECK(fused_pairs(cpu::fuse_conv_batch_norm(trace.graph)) == 0);
        cpu::GraphExecutor apart(trace.graph);
        require_same_bits(apart.run(inputs, trace.states)[0], want, "unfused");
      }
    }
  }
}

TEST_CASE("conv + batch norm fuse only where nothing can see it", "[conv][batchnorm][fusion]") {
  FusionEnv on(nullptr);
  Generator g(3);
  const Net a({"a", 1, 8, 6, 6, 8, 3, 1, 1, 1, false, false, true}, g);
  const Net b({"b", 1, 8, 6, 6, 8, 1, 1, 0, 1, false, true, true}, g);
  Tensor x = randn({1, 8, 6, 6}, &g);
  auto traced = [&](auto&& body) {
    ir::Tracer tracer;
    Tensor xs = tracer.input(x, "x");
    return tracer.finish(body(xs));
  };
  Tensor conv_weight = b.w;
  SECTION("a residual computed after the convolution (a downsampling block's) is not there yet") {
    auto trace = traced([&](const Tensor& xs) {
      NoGradGuard no_grad;
      Tensor y = conv2d(xs, conv_weight);
      Tensor late = a(xs, Tensor());  // its own conv + batch norm fuse
      return std::vector<Tensor>{
          batch_norm_act(y, b.mean, b.var, b.gamma, b.beta, false, 0.1, 1e-3, late, true)};
    });
    CHECK(fused_pairs(cpu::fuse_conv_batch_norm(trace.graph)) == 1);
    // The executor runs the convolution after the residual instead, where both pairs fuse.
    const ir::Graph sunk = cpu::sink_convs_to_batch_norms(trace.graph);
    REQUIRE(sunk.nodes.size() == trace.graph.nodes.size());
    CHECK(fused_pairs(cpu::fuse_conv_batch_norm(sunk)) == 2);
    for (size_t v = 0; v < sunk.values.size(); ++v)
      if (sunk.values[v].kind == ir::ValueKind::Op) {
        const auto& node = sunk.nodes[size_t(sunk.values[v].node)];
        CHECK(node.outputs[size_t(sunk.values[v].output)] == int64_t(v));
        for (auto in : node.inputs)  // every input exists before its reader
          CHECK((sunk.values[size_t(in)].kind != ir::ValueKind::Op ||
                 sunk.values[size_t(in)].node < sunk.values[v].node));
      }
    cpu::GraphExecutor exe(trace.graph);
    CHECK(fused_pairs(cpu::fuse_conv_batch_norm(exe.graph())) == 2);
    {
      FusionEnv off("0");
      CHECK(cpu::sink_convs_to_batch_norms(trace.graph).signature() == trace.graph.signature());
    }
    Tensor want;
    {
      NoGradGuard no_grad;
      want = batch_norm_act(conv2d(x, conv_weight), b.mean, b.var, b.gamma, b.beta, false, 0.1,
                            1e-3, a(x, Tensor()), true);
    }
    require_same_bits(exe.run({x}, trace.states)[0], want, "late residual");
  }
  SECTION("a convolution output that is also a graph output stays apart") {
    auto trace = traced([&](const Tensor& xs) {
      NoGradGuard no_grad;
      Tensor y = conv2d(xs, conv_weight);
      return std::vector<Tensor>{
          y, batch_norm_act(y, b.mean, b.var, b.gamma, b.beta, false, 0.1, 1e-3, Tensor(), true)};
    });
    CHECK(fused_pairs(cpu::fuse_conv_batch_norm(trace.graph)) == 0);
    cpu::GraphExecutor exe(trace.graph);
    auto got = exe.run({x}, trace.states);
    NoGradGuard no_grad;
    Tensor y = conv2d(x, conv_weight);
    require_same_bits(got[0], y, "conv output");
    require_same_bits(
        got[1], batch_norm_act(y, b.mean, b.var, b.gamma, b.beta, false, 0.1, 1e-3, Tensor(), true),
        "batch norm output");
  }
  SECTION("batch norms in training mode are not fused") {
    auto trace = traced([&](const Tensor& xs) {
      NoGradGuard no_grad;
      return std::vector<Tensor>{batch_norm_act(conv2d(xs, conv_weight), Tensor(), Tensor(),
                                                b.gamma, b.beta, true, 0.1, 1e-3, Tensor(), true)};
    });
    CHECK(fused_pairs(cpu::fuse_conv_batch_norm(trace.graph)) == 0);
  }
}

TEST_CASE("ResNet-18 in eval mode runs fused, with eager's bits", "[conv][batchnorm][fusion]") {
  FusionEnv on(nullptr);
  manual_seed(11);
  auto net = models::resnet18(models::ResNetOptions().num_classes(10));
  net->eval();
  Tensor x = randn({1, 3, 40, 40});
  Tensor want;
  {
    NoGradGuard no_grad;
    want = net(x);
  }
  ir::Tracer tracer;
  Tensor xs = tracer.input(x, "x");
  Tensor ys;
  {
    NoGradGuard no_grad;
    ys = net(xs);
  }
  auto trace = tracer.finish({ys});
  // 20 batch norms: the stem's and 16 in the blocks fuse as traced; the three downsampling
  // blocks' second norms wait for their shortcut, which was traced after the convolution, and
  // fuse once the executor runs the convolution after the shortcut.
  CHECK(fused_pairs(cpu::fuse_conv_batch_norm(trace.graph)) == 17);
  cpu::GraphExecutor exe(trace.graph);
  CHECK(fused_pairs(cpu::fuse_conv_batch_norm(exe.graph())) == 20);
  require_same_bits(exe.run({x}, trace.states)[0], want, "resnet18 logits");
}

TEST_CASE("the batch norm's pass gives the same bits on AVX-512 as the generic loop",
          "[batchnorm][fusion][determinism]") {
  if (cpu::detected_isa() != cpu::Isa::avx512) {
    WARN("no AVX-512 on this CPU: only the generic pass exists");
    return;
  }
  RestoreThreadsAndIsa restore;
  Generator g(23);
  std::vector<float> x = randn({97}, &g).to_vector<float>(), r = randn({97}, &g).to_vector<float>();
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[5] = -0.0f;
  x[7] = std::numeric_limits<float>::infinity();
  x[40] = 1e-39f;  // subnormal
  for (int64_t len : {1, 15, 16, 17, 33, 97})
    for (bool res : {false, true})
      for (bool relu : {false, true})
        for (float scale : {1.5f, -0.75f, 0.0f}) {
          INFO("length " << len << " residual " << res << " relu " << relu << " scale " << scale);
          std::vector<float> ya(97, 7.0f), yb(97, 7.0f);
          cpu::set_gemm_isa(cpu::Isa::avx512);
          cpu::affine_act(x.data(), res ? r.data() : nullptr, ya.data(), len, scale, 0.25f, relu);
          cpu::set_gemm_isa(cpu::Isa::generic);
          cpu::affine_act(x.data(), res ? r.data() : nullptr, yb.data(), len, scale, 0.25f, relu);
          REQUIRE(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)) == 0);
          for (size_t j = size_t(len); j < ya.size(); ++j) REQUIRE(ya[j] == 7.0f);  // untouched
        }
}

TEST_CASE("conv + batch norm refuses what it cannot run", "[conv][batchnorm][fusion][errors]") {
  using testing::error_of;
  std::vector<float> x(2 * 4 * 4, 1.0f), w(2 * 2, 0.5f), stats(2, 1.0f), y(2 * 4 * 4);
  ir::Attrs conv;
  conv.stride = {1, 1};
  conv.padding = {0, 0};
  conv.dilation = {1, 1};
  conv.groups = 1;
  ir::Attrs bn;
  bn.scalar = 1e-5;
  const ir::TensorMeta xm{{1, 2, 4, 4}, DType::Float32}, wm{{2, 2, 1, 1}, DType::Float32},
      cm{{2}, DType::Float32};
  const std::vector<cpu::ConstBuffer> conv_in{{x.data(), xm}, {w.data(), wm}};
  std::vector<cpu::ConstBuffer> bn_in{{y.data(), xm}, {stats.data(), cm}, {stats.data(), cm}};
  // Each output is 0.5 + 0.5 = 1, then (1 - mean 2) / sqrt(var 1 + eps).
  std::vector<float> mean(2, 2.0f);
  bn_in[1].data = mean.data();
  cpu::run_conv_batch_norm(conv, conv_in, bn, bn_in, {y.data(), xm});
  for (float v : y) REQUIRE(v == Approx(-1.0 / std::sqrt(1.0 + 1e-5)).epsilon(1e-6));
  CHECK_THAT(error_of([&] {
               cpu::run_conv_batch_norm(conv, conv_in, bn, bn_in, {x.data(), xm});
             }),
             Contains("apart from the output"));
  bn_in.pop_back();
  CHECK_THAT(error_of([&] {
               cpu::run_conv_batch_norm(conv, conv_in, bn, bn_in, {y.data(), xm});
             }),
             Contains("expected 3 batch-norm inputs, got 2"));
}
