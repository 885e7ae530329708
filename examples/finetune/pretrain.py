#!/usr/bin/python3
"""Pretrains the example CNN on the host with PyTorch, on the digits 0 to 4
only, and exports it to ONNX with its weights: the model a device then
fine-tunes with poet on what it sees, all ten digits.

usage: examples/finetune/pretrain.py OUT.onnx"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import accuracy, cnn, digits  # noqa: E402

torch.manual_seed(0)
(x, y), (tx, ty) = digits()
known = y < 5
model = cnn()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(5):
    model.train()
    perm = torch.randperm(int(known.sum()))
    xs, ys = x[known][perm], y[known][perm]
    for k in range(0, len(xs) - 31, 32):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xs[k:k + 32]), ys[k:k + 32]).backward()
        opt.step()
print(f"pretrained on digits 0-4: test accuracy {100 * accuracy(model, tx, ty):.2f}% on all ten digits "
      f"({100 * accuracy(model, tx[ty < 5], ty[ty < 5]):.2f}% on 0-4)")
model.eval()
torch.onnx.export(model, torch.zeros(1, 1, 8, 8), sys.argv[1], input_names=["x"], output_names=["logits"],
                  dynamic_axes={"x": {0: "batch"}}, opset_version=14, training=torch.onnx.TrainingMode.PRESERVE,
                  do_constant_folding=False)
