#!/usr/bin/python3
"""Generate golden data for Cerebras modelzoo's fc_mnist MLP (models/fc_mnist.hpp) with PyTorch.

Usage (Debian's PyTorch 1.13, not the pyenv python):
    /usr/bin/python3 tests/golden/gen_fc_mnist.py > tests/golden/fc_mnist.json
    /usr/bin/python3 tests/golden/gen_fc_mnist.py tests/golden/fc_mnist.json

The network is written here the way modelzoo's fc_mnist/pytorch/model.py builds it (ModuleList
`fc_layers`, `last_layer`, one shared `nonlin` and `dropout`, log_softmax over dim 1, NLLLoss),
so the keys are the ones its checkpoints hold. Weights, input and labels come from formulas the
C++ test computes too (nothing large is stored):
  parameter k, element i: float32(sin(0.37 i + 1.3 k) / sqrt(fan_in))   (as gen_nn.py)
  input element i:        float32(0.5 + 0.5 cos(0.011 i + 0.3)), shape [4, 1, 28, 28]
  labels:                 [3, 7, 1, 0]

Format (T = {"shape", "dtype", "data": [flat row-major]}):
  cases: [{"activation", "hidden_sizes", "repr", "keys", "shapes": {key: [..]},
           "output": T,                  log-probabilities of the input, eval mode
           "loss": float,                NLLLoss (mean) of output and labels
           "grads": {key: T},            d loss / d parameter, for the biases and last_layer
           "lr": float, "after": {key: T}  parameters after one SGD step (lr, no momentum),
                                           for every parameter but fc_layers.0.weight
           "output_after": T}]           log-probabilities after the step (depends on all)

Computations run in float64 from float32-representable values; floats are stored with 9
significant digits. The output is deterministic.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from goldenlib import F64, T, f32, num, formula, cli, dump  # noqa: E402 (beside this script)


class MNIST(nn.Module):
    def __init__(self, hidden_sizes, dropout, activation):
        super().__init__()
        layers = []
        size = 784
        for h in hidden_sizes:
            layers.append(nn.Linear(size, h))
            size = h
        self.fc_layers = nn.ModuleList(layers)
        self.last_layer = nn.Linear(size, 10)
        self.nonlin = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU,
                       "sigmoid": nn.Sigmoid}[activation]()
        self.dropout = nn.Dropout(dropout)

    def forward(self, inputs):
        x = torch.flatten(inputs, 1)
        for layer in self.fc_layers:
            x = self.dropout(self.nonlin(layer(x)))
        return F.log_softmax(self.last_layer(x), dim=1)


def case(activation, hidden_sizes, lr=0.1):
    net = MNIST(hidden_sizes, 0.0, activation).to(F64)
    with torch.no_grad():
        for k, p in enumerate(net.parameters()):
            p.copy_(formula(k, list(p.shape)))
    x = f32(0.5 + 0.5 * torch.cos(0.011 * torch.arange(4 * 784, dtype=F64) + 0.3)).reshape(
        4, 1, 28, 28)
    labels = torch.tensor([3, 7, 1, 0])
    out = net(x)
    loss = nn.NLLLoss()(out, labels)
    loss.backward()
    keep = [k for k in net.state_dict() if k != "fc_layers.0.weight"]
    grads = {k: T(p.grad) for k, p in net.named_parameters()
             if k.endswith("bias") or k.startswith("last_layer")}
    with torch.no_grad():
        for p in net.parameters():
            p -= lr * p.grad
        after = net(x)
    state = net.state_dict()
    return {"activation": activation, "hidden_sizes": hidden_sizes, "repr": str(net),
            "keys": list(state.keys()), "shapes": {k: list(v.shape) for k, v in state.items()},
            "output": T(out), "loss": num(loss.item()), "grads": grads, "lr": lr,
            "after": {k: T(state[k]) for k in keep}, "output_after": T(after)}


def main(out):
    doc = {"cases": [case("relu", [16, 8]), case("tanh", [12]), case("gelu", [6, 6, 6]),
                     case("sigmoid", [10])]}
    dump(doc, out)


if __name__ == "__main__":
    cli(main)
