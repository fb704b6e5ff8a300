#!/usr/bin/python3
"""Generate golden data for the UNet of models/unet.hpp with PyTorch.

Usage (Debian's PyTorch 1.13, not the pyenv python):
    /usr/bin/python3 tests/golden/gen_unet.py > tests/golden/unet.json
    /usr/bin/python3 tests/golden/gen_unet.py tests/golden/unet.json

The network is written here in plain torch the way Cerebras modelzoo's vision/pytorch/unet
builds it (Encoder with `unet_blocks` and `pooling_layers`, a `bottleneck` UNetBlock, Decoder with
`unet_blocks` and `transpose_layers`, each UNetBlock's `layers` a Sequential of
conv [-> BatchNorm2d] -> ReLU Sequentials, `final_conv` a Sequential of one 1x1 conv; the decoder
concatenates [upsampled, skip] on channels), so the keys are the ones its checkpoints hold. The
loss is modelzoo's bce: F.binary_cross_entropy_with_logits, mean over every pixel.

Weights, input and mask come from formulas the C++ test computes too (nothing large is stored):
  parameter k (k-th entry of "params"), element i: float32(sin(0.37 i + 1.3 k) / sqrt(fan_in)),
                          fan_in = numel / shape[0]                      (as gen_fc_mnist.py)
  input element i:        float32(0.5 + 0.5 cos(0.011 i + 0.3)), shape [2, C, 16, 16]
  mask element i:         1 if sin(0.23 i + 0.5) > 0.3 else 0,   shape [2, 1, 16, 16]

Format (T = {"shape", "dtype", "data": [flat row-major]}):
  cases: [{"name", "in_channels", "encoder_filters", "bottleneck", "norm", "bias",
           "keys": [state-dict keys], "params": [parameter names, in order],
           "shapes": {key: [..]},
           "logits": T,             training mode (batch norms use the batch's statistics)
           "loss": float,           BCE with logits (mean) of logits and mask
           "grads": {name: T}}]     d loss / d parameter for a few parameters

Computations run in float64 from float32-representable values; floats are stored with 9
significant digits. The output is deterministic.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from goldenlib import F64, T, f32, num, formula, cli, dump  # noqa: E402 (beside this script)


def conv_norm_act(cin, cout, norm, bias):
    layers = [nn.Conv2d(cin, cout, 3, padding=1, bias=bias)]
    if norm:
        layers.append(nn.BatchNorm2d(cout))
    layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class UNetBlock(nn.Module):
    def __init__(self, cin, cout, norm, bias, convs=2):
        super().__init__()
        self.layers = nn.Sequential(
            *[conv_norm_act(cin if i == 0 else cout, cout, norm, bias) for i in range(convs)])

    def forward(self, x):
        return self.layers(x)


class Encoder(nn.Module):
    def __init__(self, cin, filters, norm, bias):
        super().__init__()
        blocks = []
        for f in filters:
            blocks.append(UNetBlock(cin, f, norm, bias))
            cin = f
        self.unet_blocks = nn.ModuleList(blocks)
        self.pooling_layers = nn.ModuleList([nn.MaxPool2d(2, 2) for _ in filters])

    def forward(self, x):
        skips = []
        for block, pool in zip(self.unet_blocks, self.pooling_layers):
            x = block(x)
            skips.append(x)
            x = pool(x)
        return x, skips


class Decoder(nn.Module):
    def __init__(self, cin, filters, norm, bias):
        super().__init__()
        dec = list(reversed(filters))
        blocks, ups = [], []
        for i, f in enumerate(dec):
            ups.append(nn.ConvTranspose2d(cin, f, 2, stride=2, bias=bias))
            blocks.append(UNetBlock(f + dec[i], f, norm, bias))
            cin = f
        self.unet_blocks = nn.ModuleList(blocks)
        self.transpose_layers = nn.ModuleList(ups)

    def forward(self, x, skips):
        for up, block, skip in zip(self.transpose_layers, self.unet_blocks, reversed(skips)):
            x = block(torch.cat([up(x), skip], dim=1))
        return x


class UNet(nn.Module):
    def __init__(self, cin, filters, bottleneck, norm, bias, classes=1):
        super().__init__()
        self.encoder = Encoder(cin, filters, norm, bias)
        self.bottleneck = UNetBlock(filters[-1], bottleneck, norm, bias)
        self.decoder = Decoder(bottleneck, filters, norm, bias)
        self.final_conv = nn.Sequential(nn.Conv2d(filters[0], classes, 1, bias=True))

    def forward(self, x):
        x, skips = self.encoder(x)
        return self.final_conv(self.decoder(self.bottleneck(x), skips))


def case(name, cin, filters, bottleneck, norm, bias):
    torch.manual_seed(0)
    net = UNet(cin, filters, bottleneck, norm, bias).to(F64)
    net.train()
    params = [k for k, _ in net.named_parameters()]
    with torch.no_grad():
        for k, (pname, p) in enumerate(net.named_parameters()):
            p.copy_(formula(k, list(p.shape)))
    shape = [2, cin, 16, 16]
    n = 2 * cin * 256
    x = f32(0.5 + 0.5 * torch.cos(0.011 * torch.arange(n, dtype=F64) + 0.3)).reshape(shape)
    mask = (torch.sin(0.23 * torch.arange(2 * 256, dtype=F64) + 0.5) > 0.3).to(F64)
    mask = mask.reshape(2, 1, 16, 16)
    logits = net(x)
    loss = F.binary_cross_entropy_with_logits(logits, mask)
    loss.backward()
    named = dict(net.named_parameters())
    pick = [params[0], params[1], "bottleneck.layers.1.0.weight",
            "decoder.transpose_layers.0.weight", "decoder.unet_blocks.1.layers.0.0.weight",
            "final_conv.0.weight", "final_conv.0.bias"]
    if norm:
        pick.append("encoder.unet_blocks.1.layers.0.1.weight")
        pick.append("encoder.unet_blocks.1.layers.0.1.bias")
    else:
        pick.append("decoder.transpose_layers.1.bias")
    state = net.state_dict()
    return {"name": name, "in_channels": cin, "encoder_filters": filters,
            "bottleneck": bottleneck, "norm": norm, "bias": bias,
            "keys": list(state.keys()), "params": params,
            "shapes": {k: list(v.shape) for k, v in state.items()},
            "logits": T(logits), "loss": num(loss.item()),
            "grads": {k: T(named[k].grad) for k in pick}}


def main(out):
    doc = {"cases": [case("tiny", 1, [4, 8], 16, False, True),
                     case("tiny_batchnorm_rgb", 3, [4, 8], 16, True, False)]}
    dump(doc, out)


if __name__ == "__main__":
    cli(main)
