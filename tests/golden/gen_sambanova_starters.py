#!/usr/bin/python3
"""Generate golden data for SambaNova's starter models (models/lenet.hpp, models/ffn_mnist.hpp,
models/logistic_regression.hpp) with PyTorch.

Usage (Debian's PyTorch 1.13, not the pyenv python):
    /usr/bin/python3 tests/golden/gen_sambanova_starters.py > tests/golden/sambanova_starters.json
    /usr/bin/python3 tests/golden/gen_sambanova_starters.py tests/golden/sambanova_starters.json

The three networks are written here as SambaNova's tutorials build them (sambanova/tutorials
lenet/lenet.py and hello_world/logreg.py, and the FFNLogReg of ffn_mnist.py): LeNet with 3 x 3
bias-free convolutions padded by 1, fc1 on 16 * 7 * 7 features; FFNLogReg as `ffn` (gemm1, relu,
gemm2, no biases) under `logreg` (lin_layer, no bias); LogReg as one `lin_layer`. Each keeps its
`criterion` (CrossEntropyLoss), so the reprs print it as the originals do. Weights, inputs and
labels come from formulas the C++ test computes too (goldenlib.formula: parameter k of
named_parameters(), element i = float32(sin(0.37 i + 1.3 k) / sqrt(fan_in))):
  input element i: float32(0.5 + 0.5 cos(0.011 i + 0.3)), shape [2, 1, 28, 28] for LeNet and
                   [4, num_features] for the others
  labels:          [3, 7] for LeNet, [3, 7, 1, 0] for the others

Format (T = {"shape", "dtype", "data": [flat row-major]}):
  cases: [{"model": "lenet" | "ffn_mnist" | "logreg", "config": {option: value},
           "repr", "keys", "shapes": {key: [..]},
           "input_shape": [..], "labels": [..],
           "logits": T, "loss": float,     CrossEntropyLoss (mean) of the logits and labels
           "grads": {key: T},              d loss / d parameter, every parameter, whole
           "lr", "momentum", "weight_decay": the starter's SGD hyperparameters (its defaults
                                            as the ALCF guide runs it),
           "logits_after": T}]             logits after one such SGD step

Computations run in float64 from float32-representable values; floats are stored with 9
significant digits. The output is deterministic.
"""

import torch
import torch.nn as nn

from goldenlib import F64, T, f32, num, formula, cli, dump  # noqa: E402 (beside this script)


class LeNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1),
                               dilation=(1, 1), bias=False)
        self.maxpool1 = nn.MaxPool2d(kernel_size=(2, 2))
        self.conv2 = nn.Conv2d(6, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1),
                               dilation=(1, 1), bias=False)
        self.maxpool2 = nn.MaxPool2d(kernel_size=(2, 2))
        self.fc1 = nn.Linear(16 * 7 * 7, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, inputs, labels):
        x = self.maxpool1(self.conv1(inputs).relu())
        x = self.maxpool2(self.conv2(x).relu())
        x = torch.reshape(x, [x.shape[0], -1])
        x = self.fc2(self.fc1(x).relu()).relu()
        out = self.fc3(x)
        return self.criterion(out, labels), out


class FFN(nn.Module):
    def __init__(self, num_features, ffn_dim_1, ffn_dim_2):
        super().__init__()
        self.gemm1 = nn.Linear(num_features, ffn_dim_1, bias=False)
        self.relu = nn.ReLU()
        self.gemm2 = nn.Linear(ffn_dim_1, ffn_dim_2, bias=False)

    def forward(self, x):
        return self.gemm2(self.relu(self.gemm1(x)))


class LogReg(nn.Module):
    def __init__(self, num_features, num_classes, bias):
        super().__init__()
        self.lin_layer = nn.Linear(num_features, num_classes, bias=bias)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, inputs, targets):
        out = self.lin_layer(inputs)
        return self.criterion(out, targets), out


class FFNLogReg(nn.Module):
    def __init__(self, num_features, ffn_dim_1, ffn_dim_2, num_classes):
        super().__init__()
        self.ffn = FFN(num_features, ffn_dim_1, ffn_dim_2)
        self.logreg = LogReg(ffn_dim_2, num_classes, False)

    def forward(self, inputs, targets):
        return self.logreg(self.ffn(inputs), targets)


def formula_input(shape):
    n = 1
    for s in shape:
        n *= s
    return f32(0.5 + 0.5 * torch.cos(0.011 * torch.arange(n, dtype=F64) + 0.3)).reshape(shape)


def case(model, config, net, input_shape, labels, lr, momentum, weight_decay):
    net = net.to(F64)
    with torch.no_grad():
        for k, p in enumerate(net.parameters()):
            p.copy_(formula(k, list(p.shape)))
    x = formula_input(input_shape)
    y = torch.tensor(labels)
    loss, logits = net(x, y)
    loss.backward()
    grads = {k: T(p.grad) for k, p in net.named_parameters()}
    sgd = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    sgd.step()
    with torch.no_grad():
        _, after = net(x, y)
    state = net.state_dict()
    return {"model": model, "config": config, "repr": str(net), "keys": list(state.keys()),
            "shapes": {k: list(v.shape) for k, v in state.items()},
            "input_shape": input_shape, "labels": labels,
            "logits": T(logits), "loss": num(loss.item()), "grads": grads,
            "lr": lr, "momentum": momentum, "weight_decay": weight_decay,
            "logits_after": T(after)}


def main(out):
    doc = {"cases": [
        # lenet.py as the ALCF guide runs it: --lr 0.01 --momentum 0.0 --weight-decay 0.01.
        case("lenet", {"num_classes": 10}, LeNet(10), [2, 1, 28, 28], [3, 7],
             0.01, 0.0, 0.01),
        # ffn_mnist.py's defaults: --lr 0.001 --momentum 0.0 --weight-decay 1e-4.
        case("ffn_mnist", {"num_features": 784, "ffn_dim_1": 32, "ffn_dim_2": 32,
                           "num_classes": 10},
             FFNLogReg(784, 32, 32, 10), [4, 784], [3, 7, 1, 0], 0.001, 0.0, 1e-4),
        # logreg.py as the ALCF guide runs it: --lr 0.001 --weight-decay 1e-4, with and
        # without --bias.
        case("logreg", {"num_features": 784, "num_classes": 10, "bias": False},
             LogReg(784, 10, False), [4, 784], [3, 7, 1, 0], 0.001, 0.0, 1e-4),
        case("logreg", {"num_features": 784, "num_classes": 10, "bias": True},
             LogReg(784, 10, True), [4, 784], [3, 7, 1, 0], 0.001, 0.0, 1e-4),
    ]}
    dump(doc, out)


if __name__ == "__main__":
    cli(main)
