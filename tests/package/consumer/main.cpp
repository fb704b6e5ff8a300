// Consumer program for the packaging tests: trains a tiny linear model with autograd and
// prints a fixed line the test compares.
#include <iostream>

#include <ipuml/ipuml.hpp>

int main() {
  using namespace ipuml;
  Tensor x = from_vector<float>({1, 2}, {1, 2});
  Tensor w = from_vector<float>({1, 1, 2, 1}, {2, 2});
  std::cout << "loss decreased: ";
  Tensor p = zeros({2, 2}).requires_grad_();
  double first = 0, last = 0;
  for (int i = 0; i < 20; ++i) {
    p.set_grad(Tensor());
    Tensor loss = mse_loss(matmul(x, p), matmul(x, w));
    loss.backward();
    (i == 0 ? first : last) = loss.item<float>();
    NoGradGuard ng;
    p.sub_(mul(p.grad(), 0.05));
  }
  std::cout << (last < first ? "yes" : "no") << "; y = [" << matmul(x, w).to_vector<float>()[0]
            << ", " << matmul(x, w).to_vector<float>()[1] << "]\n";
  return 0;
}
