// ipuml::nn, everything at once: Module and the holder idiom, init, functional (with
// interpolate and rotary_embedding), and every module (Linear, Conv, ConvTranspose, pooling,
// normalisation, Embedding, Dropout, activations, containers, losses, MultiheadAttention).
#pragma once

#include <ipuml/nn/module.hpp>
#include <ipuml/nn/init.hpp>
#include <ipuml/nn/functional.hpp>
#include <ipuml/nn/modules/common.hpp>
#include <ipuml/nn/modules/linear.hpp>
#include <ipuml/nn/modules/conv.hpp>
#include <ipuml/nn/modules/conv_transpose.hpp>
#include <ipuml/nn/modules/pooling.hpp>
#include <ipuml/nn/modules/normalization.hpp>
#include <ipuml/nn/modules/embedding.hpp>
#include <ipuml/nn/modules/dropout.hpp>
#include <ipuml/nn/modules/activation.hpp>
#include <ipuml/nn/modules/flatten.hpp>
#include <ipuml/nn/modules/container.hpp>
#include <ipuml/nn/modules/loss.hpp>
#include <ipuml/nn/modules/attention.hpp>
#include <ipuml/nn/modules/functional.hpp>
#include <ipuml/nn/functional_options.hpp>
#include <ipuml/nn/interpolate.hpp>
#include <ipuml/nn/rotary_embedding.hpp>
