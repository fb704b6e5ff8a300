// The convolution layer shapes the benchmarks compare (MNIST, Neuron-Inverter, ResNet-50);
// benchmarks/peers/torch_conv.py lists the same shapes for PyTorch.
#pragma once

#include <cstdint>

struct ConvLayer {
  const char* name;
  int64_t n, c_in, h, w, c_out, k, stride, pad;
  bool one_d;  // Conv1d over [n, c_in, w] with kernel k
};

inline constexpr ConvLayer kConvLayers[] = {
    {"mnist_conv1", 64, 1, 28, 28, 32, 3, 1, 0, false},
    {"mnist_conv2", 64, 32, 13, 13, 64, 3, 1, 0, false},
    {"neuron_conv1d_1", 64, 4, 1, 1600, 30, 4, 1, 0, true},
    {"neuron_conv1d_2", 64, 30, 1, 399, 90, 4, 1, 0, true},
    {"resnet_stem_7x7s2", 4, 3, 224, 224, 64, 7, 2, 3, false},
    {"resnet_3x3_64", 4, 64, 56, 56, 64, 3, 1, 1, false},
    {"resnet_1x1_256_64", 4, 256, 56, 56, 64, 1, 1, 0, false},
    {"resnet_3x3_256", 4, 256, 14, 14, 256, 3, 1, 1, false},
};
