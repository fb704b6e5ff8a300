// Test support: one traced training step of the MNIST CNN (convolutions, pooling, softmax,
// loss, backward and the SGD update), for tests that compile or run a realistic small graph.
#pragma once

#include <ipuml/ipuml.hpp>
#include <ipuml/models/mnist_cnn.hpp>

namespace ipuml::testing {

inline ir::Trace mnist_step(int64_t batch) {
  static auto net = models::MnistCnn();
  static optim::SGD sgd(net->parameters(), optim::SGDOptions(0.05));
  ir::Tracer tracer;
  for (auto& [name, t] : net->named_parameters()) tracer.name_state(t, name);
  Tensor x = tracer.input(ir::TensorMeta{{batch, 1, 28, 28}, kFloat32}, "x");
  Tensor y = tracer.input(ir::TensorMeta{{batch}, kInt64}, "y");
  sgd.zero_grad();
  Tensor loss = cross_entropy(net(x), y);
  loss.backward();
  {
    NoGradGuard ng;
    sgd.step();
  }
  sgd.zero_grad();
  return tracer.finish({loss});
}

}  // namespace ipuml::testing
