#!/usr/bin/python3
"""Peer benchmark: PyTorch (Debian python3-torch) ResNet-50 on the CPU, written out here with
torchvision's layout (v1.5 bottlenecks [3, 4, 6, 3], stride on the 3x3 conv, BatchNorm eps 1e-5
momentum 0.1, 1000 classes; torchvision may not be installed): the training step (cross entropy,
SGD lr 0.01 momentum 0.9 weight decay 1e-4) and inference in eval mode under no_grad, 224x224.
Prints "torch resnet50 train|infer batch=B threads=T samples_per_s=X".
Usage: /usr/bin/python3 benchmarks/peers/torch_resnet.py [--task train] [--batch 4 16]
       [--threads 1 2] [--seconds 3]"""
import argparse
import time

import torch
import torch.nn as nn

from peer_threads import set_threads


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet50(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, 3, 1)
        self.layer2 = self._make_layer(128, 4, 2)
        self.layer3 = self._make_layer(256, 6, 2)
        self.layer4 = self._make_layer(512, 3, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * 4:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride,
                                                 bias=False), nn.BatchNorm2d(planes * 4))
        layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--task", choices=["train", "infer"], default="train")
    p.add_argument("--batch", type=int, nargs="+", default=[4])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    for b in a.batch:
        for t in a.threads:
            set_threads(t)
            torch.manual_seed(0)
            net = ResNet50()
            assert sum(q.numel() for q in net.parameters()) == 25557032
            x, y = torch.randn(b, 3, 224, 224), torch.randint(0, 1000, (b,))
            if a.task == "train":
                opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

                def step():
                    opt.zero_grad()
                    nn.functional.cross_entropy(net(x), y).backward()
                    opt.step()
            else:
                net.eval()

                def step():
                    with torch.no_grad():
                        net(x)
            step()
            reps, t0 = 0, time.perf_counter()
            while True:
                step()
                reps += 1
                el = time.perf_counter() - t0
                if el >= a.seconds:
                    break
            print(f"torch resnet50 {a.task} batch={b} threads={t} "
                  f"samples_per_s={reps * b / el:.2f}", flush=True)


if __name__ == "__main__":
    main()
