// The model zoo in one include: the MNIST CNN, ResNet, BERT, GPT-2, GPT-J, the Neuron-Inverter,
// Cerebras modelzoo's fc_mnist and UNet, and SambaNova's starters (LeNet, ffn_mnist's FFNLogReg,
// logreg's LogReg), each as in its reference implementation (see each header).
#pragma once

#include <ipuml/models/mnist_cnn.hpp>
#include <ipuml/models/resnet.hpp>
#include <ipuml/models/bert.hpp>
#include <ipuml/models/gpt2.hpp>
#include <ipuml/models/gptj.hpp>
#include <ipuml/models/neuron_inverter.hpp>
#include <ipuml/models/fc_mnist.hpp>
#include <ipuml/models/unet.hpp>
#include <ipuml/models/lenet.hpp>
#include <ipuml/models/logistic_regression.hpp>
#include <ipuml/models/ffn_mnist.hpp>
