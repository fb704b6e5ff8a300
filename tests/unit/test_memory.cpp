// Steady-state training allocates nothing new: tensor buffers come back from the host allocator's
// cache and kernel scratch from per-thread slots, so after the first steps (which size
// everything) further steps of the same shapes take no memory from the system.
#include <catch2/catch.hpp>

#include <ipuml/backends/cpu/gemm_kernels.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/mnist_cnn.hpp>
#include <ipuml/runtime/training_model.hpp>

using namespace ipuml;

namespace {

struct Restore {
  ~Restore() { set_num_threads(0); }
};

}  // namespace

TEST_CASE("the host allocator hands a freed block out again", "[memory]") {
  auto& alloc = HostAllocator::instance();
  const int64_t n = 123457;  // a size no other test uses, so the cache has no block of it yet
  // Earlier tests in this process (the zoo's models) may have filled the cache to its limit,
  // where a freed block would go back to the system instead.
  alloc.empty_cache();
  const auto before = alloc.stats();
  { Tensor a = zeros({n}); }
  const auto mid = alloc.stats();
  CHECK(mid.system_allocations == before.system_allocations + 1);
  CHECK(mid.cached_bytes >= before.cached_bytes + size_t(n) * 4);
  Tensor b = ones({n});
  const auto after = alloc.stats();
  CHECK(after.system_allocations == mid.system_allocations);
  CHECK(after.cache_hits == mid.cache_hits + 1);
  CHECK(b.to_vector<float>()[size_t(n) - 1] == 1.0f);  // reused memory, freshly filled

  alloc.empty_cache();
  CHECK(alloc.stats().cached_bytes == 0);
}

TEST_CASE("MNIST CNN training steps allocate nothing after the first", "[memory]") {
  Restore restore;
  const std::string mode = GENERATE("eager", "graph", "ipu");
  if (mode == "ipu" && backend::registry().count("ipu") == 0) return;
  const int threads = GENERATE(1, 2);
  CAPTURE(mode, threads);
  set_num_threads(threads);
  manual_seed(0);
  models::MnistCnn net;
  optim::SGD sgd(net->parameters(), optim::SGDOptions(0.03));
  Tensor x = randn({8, 1, 28, 28});
  Tensor y = randint(0, 10, {8});
  std::unique_ptr<runtime::TrainingModel> tm;
  if (mode != "eager") {
    auto ce = [](const Tensor& out, const Tensor& t) { return cross_entropy(out, t); };
    tm = std::make_unique<runtime::TrainingModel>(
        net.ptr(), Options().useIpuModel(mode == "ipu").showCompilationProgressBar(false), sgd, ce);
  }
  std::vector<float> losses;
  auto step = [&] {
    if (tm) {
      losses.push_back((*tm)(x, y).to_vector<float>()[0]);
    } else {
      sgd.zero_grad();
      Tensor loss = cross_entropy(net(x), y);
      loss.backward();
      sgd.step();
      losses.push_back(loss.item<float>());
    }
  };
  step();
  step();
  const auto before = HostAllocator::instance().stats();
  const size_t scratch_before = cpu::detail::scratch_allocation_count();
  for (int i = 0; i < 4; ++i) step();
  const auto after = HostAllocator::instance().stats();
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(after.cache_hits > before.cache_hits);  // the steps did allocate tensors: from the cache
  // Kernel scratch lives in per-thread slots; with 2 threads a worker may meet a kernel for the
  // first time in a later step, so the count is exact on one thread only.
  if (threads == 1) CHECK(cpu::detail::scratch_allocation_count() == scratch_before);
  CHECK(losses.back() < losses.front());  // and they trained
}
