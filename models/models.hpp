// The model zoo in one include: the MNIST CNN, ResNet, BERT, GPT-2, GPT-J, the Neuron-Inverter
// and Cerebras modelzoo's fc_mnist, each as in its reference implementation (see each header).
#pragma once

#include <ipuml/models/mnist_cnn.hpp>
#include <ipuml/models/resnet.hpp>
#include <ipuml/models/bert.hpp>
#include <ipuml/models/gpt2.hpp>
#include <ipuml/models/gptj.hpp>
#include <ipuml/models/neuron_inverter.hpp>
#include <ipuml/models/fc_mnist.hpp>
#include <ipuml/models/unet.hpp>
