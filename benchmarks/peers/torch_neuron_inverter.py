#!/usr/bin/python3
"""Peer benchmark: PyTorch (Debian python3-torch) training the Neuron-Inverter hpar_gc4 network
(train_replica.py's model: view(-1, 4, 1600), conv/pool/ReLU 4->30->90->180, BatchNorm1d(4320)
without running stats or affine, FC 512-512-512-256-128 with dropout 0.05, 15 outputs), AdamW,
MSE, local batch 192. Prints "torch neuron_inverter train batch=B threads=T samples_per_s=X".
Usage: /usr/bin/python3 benchmarks/peers/torch_neuron_inverter.py [--threads 1 2] [--seconds 3]"""
import argparse
import time

import torch
import torch.nn as nn

from peer_threads import set_threads


class NeuronInverter(nn.Module):
    def __init__(self):
        super().__init__()
        layers, cin = [], 4
        for c in (30, 90, 180):
            layers += [nn.Conv1d(cin, c, 4), nn.MaxPool1d(4), nn.ReLU()]
            cin = c
        self.cnn = nn.Sequential(*layers)
        self.bn = nn.BatchNorm1d(4320, track_running_stats=False, affine=False)
        fc, d = [], 4320
        for k in (512, 512, 512, 256, 128):
            fc += [nn.Linear(d, k), nn.ReLU(), nn.Dropout(0.05)]
            d = k
        fc.append(nn.Linear(d, 15))
        self.fc = nn.Sequential(*fc)

    def forward(self, x):
        h = self.cnn(x.view(-1, 4, 1600))
        return self.fc(self.bn(h.flatten(1)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--batch", type=int, default=192)
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    for t in a.threads:
        set_threads(t)
        torch.manual_seed(0)
        net = NeuronInverter()
        assert sum(q.numel() for q in net.parameters()) == 2980203
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
        x, y = torch.randn(a.batch, 1600, 4), torch.rand(a.batch, 15)
        def step():
            opt.zero_grad()
            nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        step()
        reps, t0 = 0, time.perf_counter()
        while True:
            step()
            reps += 1
            el = time.perf_counter() - t0
            if el >= a.seconds:
                break
        print(f"torch neuron_inverter train batch={a.batch} threads={t} "
              f"samples_per_s={reps * a.batch / el:.1f}", flush=True)


if __name__ == "__main__":
    main()
