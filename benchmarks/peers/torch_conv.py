#!/usr/bin/python3
"""Peer benchmark: PyTorch (Debian python3-torch, oneDNN) convolution forward + backward at the
layer shapes of benchmarks/conv_layers.hpp. Prints "torch conv layer=NAME threads=T ms=X".
Usage: /usr/bin/python3 benchmarks/peers/torch_conv.py [--threads 1 2] [--seconds 1]"""
import argparse
import time

import torch
import torch.nn.functional as F

from peer_threads import set_threads

LAYERS = [  # name, n, c_in, h, w, c_out, k, stride, pad, one_d (same as conv_layers.hpp)
    ("mnist_conv1", 64, 1, 28, 28, 32, 3, 1, 0, False),
    ("mnist_conv2", 64, 32, 13, 13, 64, 3, 1, 0, False),
    ("neuron_conv1d_1", 64, 4, 1, 1600, 30, 4, 1, 0, True),
    ("neuron_conv1d_2", 64, 30, 1, 399, 90, 4, 1, 0, True),
    ("resnet_stem_7x7s2", 4, 3, 224, 224, 64, 7, 2, 3, False),
    ("resnet_3x3_64", 4, 64, 56, 56, 64, 3, 1, 1, False),
    ("resnet_1x1_256_64", 4, 256, 56, 56, 64, 1, 1, 0, False),
    ("resnet_3x3_256", 4, 256, 14, 14, 256, 3, 1, 1, False),
]

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seconds", type=float, default=1.0)
    a = p.parse_args()
    for t in a.threads:
        set_threads(t)
        for name, n, ci, h, w, co, k, s, pad, one_d in LAYERS:
            if one_d:
                x = torch.randn(n, ci, w, requires_grad=True)
                wt = torch.randn(co, ci, k, requires_grad=True)
                conv = lambda: F.conv1d(x, wt, None, s, pad)
            else:
                x = torch.randn(n, ci, h, w, requires_grad=True)
                wt = torch.randn(co, ci, k, k, requires_grad=True)
                conv = lambda: F.conv2d(x, wt, None, s, pad)
            def step():
                x.grad = None
                wt.grad = None
                y = conv()
                y.backward(torch.ones_like(y))
            step()
            reps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < a.seconds:
                step()
                reps += 1
            ms = 1e3 * (time.perf_counter() - t0) / reps
            print(f"torch conv layer={name} threads={t} ms={ms:.3f}", flush=True)

if __name__ == "__main__":
    main()
