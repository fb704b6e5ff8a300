// nn::functional (PyTorch's F): the stateless nn ops under one namespace, so model code reads
// `namespace F = ipuml::nn::functional; F::relu(F::conv2d(x, w))`. They are the ops themselves.
#pragma once

#include <ipuml/tensor/ops.hpp>

namespace ipuml::nn::functional {

using ipuml::Reduction;

// Layers.
using ipuml::conv1d;
using ipuml::conv2d;
using ipuml::conv_transpose2d;
using ipuml::linear;
// F::embedding(input, weight, options) is LibTorch's, indices first (functional_options.hpp);
// ipuml::embedding(weight, indices) is ATen's torch::embedding.
// Pooling.
using ipuml::adaptive_avg_pool2d;
using ipuml::avg_pool2d;
using ipuml::max_pool1d;
using ipuml::max_pool2d;
// Normalisation and regularisation.
using ipuml::batch_norm;
using ipuml::batch_norm_act;
using ipuml::dropout;
using ipuml::group_norm;
using ipuml::layer_norm;
// Attention.
using ipuml::scaled_dot_product_attention;
// Activations.
using ipuml::gelu;
using ipuml::log_softmax;
using ipuml::relu;
using ipuml::sigmoid;
using ipuml::softmax;
using ipuml::tanh;
// Shape.
using ipuml::flatten;
// Losses.
using ipuml::cross_entropy;
using ipuml::mse_loss;
using ipuml::nll_loss;

}  // namespace ipuml::nn::functional
