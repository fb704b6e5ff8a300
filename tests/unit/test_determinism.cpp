// Same seed, same bits, whatever the thread count: a training step with dropout, and random
// tensors, give identical bits with 1 and 2 oneTBB threads.
#include <cstring>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

using namespace ipuml;

namespace {

struct Restore {
  ~Restore() { set_num_threads(0); }
};

std::vector<uint32_t> bits(const Tensor& t) {
  auto v = t.contiguous().to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

// A dropout MLP trained for 3 steps from seed 42; returns the final weights and losses.
std::vector<uint32_t> train(int threads) {
  set_num_threads(threads);
  manual_seed(42);
  Tensor w1 = mul(randn({256, 512}), 0.05).detach().requires_grad_();
  Tensor w2 = mul(randn({10, 256}), 0.05).detach().requires_grad_();
  Tensor x = randn({64, 512});
  Tensor y = randint(0, 10, {64});
  std::vector<uint32_t> out;
  for (int s = 0; s < 3; ++s) {
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
    Tensor h = dropout(relu(linear(x, w1)), 0.5, true);
    Tensor loss = cross_entropy(softmax(linear(h, w2), 1), y);
    loss.backward();
    NoGradGuard ng;
    w1.sub_(mul(w1.grad(), 0.05));
    w2.sub_(mul(w2.grad(), 0.05));
    for (auto b : bits(loss)) out.push_back(b);
  }
  for (auto b : bits(w1)) out.push_back(b);
  for (auto b : bits(w2)) out.push_back(b);
  return out;
}

}  // namespace

TEST_CASE("a dropout training step is bit-identical with 1 and 2 threads", "[determinism]") {
  Restore restore;
  auto one = train(1);
  auto two = train(2);
  REQUIRE(one.size() == two.size());
  CHECK(one == two);
  // And the seed matters.
  set_num_threads(0);
  manual_seed(43);
  Tensor other = randn({4});
  manual_seed(42);
  CHECK(bits(randn({4})) != bits(other));
}

TEST_CASE("random tensors do not depend on thread count", "[determinism]") {
  Restore restore;
  set_num_threads(1);
  Generator g1(5);
  Tensor a = randn({100000}, &g1);
  set_num_threads(2);
  Generator g2(5);
  Tensor b = randn({100000}, &g2);
  CHECK(bits(a) == bits(b));
  auto v = a.to_vector<double>();
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  s /= static_cast<double>(v.size());
  CHECK(std::abs(m) < 0.02);
  CHECK(std::abs(s - 1.0) < 0.02);
}
