// ipuml::optim umbrella: optimizers with parameter groups, LR schedulers, loss scaling and
// gradient clipping. Every update is written with tensor ops, so it can be traced into a graph.
#pragma once

#include <ipuml/optim/optimizer.hpp>
#include <ipuml/optim/sgd.hpp>
#include <ipuml/optim/adam.hpp>
#include <ipuml/optim/adamw.hpp>
#include <ipuml/optim/lamb.hpp>
#include <ipuml/optim/lr_scheduler.hpp>
#include <ipuml/optim/loss_scaler.hpp>
#include <ipuml/optim/clip_grad.hpp>
#include <ipuml/optim/param_groups.hpp>
