"""poet's trainable zoo models (src/graph/zoo.c) rebuilt in PyTorch, for the
throughput comparison in bench/train.py."""
import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, planes, 3, stride, 1)
        self.b1 = nn.BatchNorm2d(planes)
        self.c2 = nn.Conv2d(planes, planes, 3, 1, 1)
        self.b2 = nn.BatchNorm2d(planes)
        self.skip = None
        if stride != 1 or cin != planes:
            self.skip = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, 0), nn.BatchNorm2d(planes))

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + (self.skip(x) if self.skip is not None else x))


def resnet_small():
    return nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(), Residual(8, 8, 1),
                         Residual(8, 16, 2), Residual(16, 16, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(16, 10))


def cnn_fashion():
    return nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(1568, 64), nn.ReLU(), nn.Dropout(0.25), nn.Linear(64, 10))


MODELS = {"resnet_small": resnet_small, "cnn_fashion": cnn_fashion}
