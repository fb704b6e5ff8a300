// nn::functional (PyTorch's F): the stateless nn ops under one namespace, so model code reads
// `namespace F = ipuml::nn::functional; F::relu(F::conv2d(x, w))`. They are the ops themselves.
#pragma once

#include <ipuml/tensor/ops.hpp>

namespace ipuml::nn::functional {

using ipuml::Reduction;

// Layers.
using ipuml::linear;
using ipuml::conv1d;
using ipuml::conv2d;
using ipuml::embedding;
// Pooling.
using ipuml::max_pool1d;
using ipuml::max_pool2d;
using ipuml::avg_pool2d;
using ipuml::adaptive_avg_pool2d;
// Normalisation and regularisation.
using ipuml::batch_norm;
using ipuml::layer_norm;
using ipuml::group_norm;
using ipuml::dropout;
// Activations.
using ipuml::relu;
using ipuml::gelu;
using ipuml::tanh;
using ipuml::sigmoid;
using ipuml::softmax;
using ipuml::log_softmax;
// Shape.
using ipuml::flatten;
// Losses.
using ipuml::cross_entropy;
using ipuml::nll_loss;
using ipuml::mse_loss;

}  // namespace ipuml::nn::functional
