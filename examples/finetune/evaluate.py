#!/usr/bin/python3
"""Loads a fine-tuned ONNX model (poet train --onnx-out) back into the
PyTorch CNN and reports its test accuracy: the weights poet trained, in
PyTorch.

usage: examples/finetune/evaluate.py MODEL.onnx"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import accuracy, cnn, digits, load_onnx_weights  # noqa: E402

_, (tx, ty) = digits()
model = load_onnx_weights(cnn(), sys.argv[1])
print(f"{sys.argv[1]} in PyTorch: test accuracy {100 * accuracy(model, tx, ty):.2f}% on all ten digits")
