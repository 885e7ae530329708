#!/usr/bin/python3
"""Writes the small ONNX files the CLI and device tests read (committed, so
that the tests need no Python): models poet must refuse, one line each,
and, exported by torch.onnx.export, a digits CNN, a 1-d CNN, a sequence
transformer, a small vision transformer and a MobileNet-style CNN.

usage: tests/data/onnx/make.py   (Debian's python3-onnx and python3-torch)"""
import os
import sys

import onnx
import torch
from onnx import TensorProto, helper
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", ".."))
from onnx_check import TinyViT  # noqa: E402 (tests/onnx_check.py: the model it checks against PyTorch)


def save(name, nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.save(model, os.path.join(here, name + ".onnx"))


x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
# an op poet does not have
save("unsupported_op", [helper.make_node("LpNormalization", ["x"], ["y"], name="norm")], [x], [y])
# an input that nothing produces
save("dangling", [helper.make_node("Relu", ["nowhere"], ["y"], name="relu")], [x], [y])
# a cycle: a reads b, b reads a
save("cycle", [helper.make_node("Add", ["x", "b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second"),
               helper.make_node("Relu", ["b"], ["y"], name="third")], [x], [y])
# shapes that do not fit: [batch, 4] @ [3, 2]
w = helper.make_tensor("w", TensorProto.FLOAT, [3, 2], [0.0] * 6)
save("shape_mismatch", [helper.make_node("MatMul", ["x", "w"], ["y"], name="product")], [x], [y], [w])
# weights tied: one initializer is the weights of two products
tied = helper.make_tensor("tied", TensorProto.FLOAT, [4, 4], [0.1] * 16)
save("tied", [helper.make_node("MatMul", ["x", "tied"], ["h"], name="first"),
              helper.make_node("MatMul", ["h", "tied"], ["y"], name="second")], [x], [y], [tied])
# nearest Resize by 3: half_pixel with rounding repeats every element (read);
# asymmetric with rounding does not, and linear is another op (refused)
by3 = helper.make_tensor("by3", TensorProto.FLOAT, [4], [1, 1, 3, 3])
for name, attrs in [("resize_half_pixel", {}),
                    ("resize_asymmetric_round", {"coordinate_transformation_mode": "asymmetric"}),
                    ("resize_linear", {"mode": "linear"})]:
    save(name, [helper.make_node("Resize", ["img", "", "by3"], ["y"], name="resize", **attrs)],
         [helper.make_tensor_value_info("img", TensorProto.FLOAT, ["batch", 1, 8, 8])], [y], [by3])
# probabilities out: the loss takes the final Softmax over
w44 = helper.make_tensor("w44", TensorProto.FLOAT, [4, 4], [0.1 * k for k in range(16)])
save("softmax_out", [helper.make_node("Gemm", ["x", "w44"], ["z"], name="dense"),
                     helper.make_node("Softmax", ["z"], ["y"], name="probs", axis=1)], [x], [y], [w44])
# Mod in shape arithmetic: -7 mod 5 is 3 (the divisor's sign), -2 with fmod 1;
# plus 3, the row length [-1, 6] (or [-1, 1]) of a Reshape
x12 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 12])
for name, fmod in [("mod_shape", 0), ("fmod_shape", 1)]:
    consts = [helper.make_node("Constant", [], [k], name=k, value=helper.make_tensor(k, TensorProto.INT64, [1], [v]))
              for k, v in [("minus7", -7), ("five", 5), ("three", 3), ("rows", -1)]]
    save(name, consts + [helper.make_node("Mod", ["minus7", "five"], ["r"], name="mod", fmod=fmod),
                         helper.make_node("Add", ["r", "three"], ["cols"], name="plus"),
                         helper.make_node("Concat", ["rows", "cols"], ["shape"], name="shape", axis=0),
                         helper.make_node("Reshape", ["x", "shape"], ["y"], name="rows_of")], [x12], [y])
# the mean over the tokens of [batch, 5, 4], kept as an axis of 1
save("token_mean", [helper.make_node("ReduceMean", ["seq"], ["y"], name="mean", axes=[1], keepdims=1)],
     [helper.make_tensor_value_info("seq", TensorProto.FLOAT, ["batch", 5, 4])], [y])
# an attribute value poet does not support
img = helper.make_tensor_value_info("img", TensorProto.FLOAT, ["batch", 1, 8, 8])
k = helper.make_tensor("k", TensorProto.FLOAT, [2, 1, 3, 3], [0.1] * 18)
save("bad_auto_pad", [helper.make_node("Conv", ["img", "k"], ["y"], name="conv", auto_pad="SAME")], [img], [y], [k])
# Keras' "same" padding, as converters write it
save("auto_pad", [helper.make_node("Conv", ["img", "k"], ["y"], name="conv", auto_pad="SAME_UPPER", strides=[2, 2])],
     [img], [y], [k])
# padding poet does not fold: reflecting, and zeros before a max pool (whose own padding is -inf)
pads = helper.make_tensor("pads", TensorProto.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1])
save("reflect_pad", [helper.make_node("Pad", ["img", "pads"], ["y"], name="pad", mode="reflect")], [img], [y], [pads])
save("pad_max_pool", [helper.make_node("Pad", ["img", "pads"], ["padded"], name="pad"),
                      helper.make_node("MaxPool", ["padded"], ["y"], name="pool", kernel_shape=[2, 2])], [img], [y], [pads])
# a pixel shuffle by hand: a 6-d transpose whose axes do not merge to 4
six = helper.make_tensor("six", TensorProto.INT64, [6], [0, 1, 2, 2, 4, 4])
save("pixel_shuffle", [helper.make_node("Reshape", ["img", "six"], ["r"], name="split"),
                       helper.make_node("Transpose", ["r"], ["y"], name="shuffle", perm=[0, 1, 4, 2, 5, 3])],
     [helper.make_tensor_value_info("img", TensorProto.FLOAT, [2, 4, 4, 4])], [y], [six])

# a digits CNN (batch norm, ReLU, max pool, linear) with random weights
torch.manual_seed(3)
cnn = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(8, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 16, 10))
cnn.eval()
torch.onnx.export(cnn, torch.zeros(1, 1, 8, 8), os.path.join(here, "digits_cnn.onnx"), input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "batch"}}, opset_version=14,
                  training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)

# a 1-d CNN over the digits' rows (8 channels of 8 samples), as sensor and
# audio models are
torch.manual_seed(5)
cnn1d = nn.Sequential(nn.Conv1d(8, 16, 3, padding=1), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
                      nn.Conv1d(16, 16, 3, padding=1), nn.BatchNorm1d(16), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
                      nn.Flatten(), nn.Linear(16, 10))
cnn1d.eval()
torch.onnx.export(cnn1d, torch.zeros(1, 8, 8), os.path.join(here, "digits_1d.onnx"), input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "batch"}}, opset_version=14,
                  training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)

# a sequence transformer over the digits' rows (8 tokens of 8 values), sequence first, with the tokens' mean
torch.manual_seed(6)

class RowTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.pos = nn.Parameter(torch.randn(8, 1, 16) * 0.3)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0), 1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.enc(self.proj(x).transpose(0, 1) + self.pos).mean(0))


torch.onnx.export(RowTransformer().eval(), torch.zeros(1, 8, 8), os.path.join(here, "digits_seq.onnx"),
                  input_names=["x"], output_names=["logits"], dynamic_axes={"x": {0: "batch"}}, opset_version=14,
                  training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)

# a vision transformer in small (a class token and a position embedding that
# train, an encoder layer), its tokens away from zero
torch.manual_seed(4)
vit = TinyViT()
with torch.no_grad():
    vit.cls.normal_(0, 0.3)
    vit.pos.normal_(0, 0.3)
vit.eval()
torch.onnx.export(vit, torch.zeros(1, 1, 8, 8), os.path.join(here, "digits_vit.onnx"), input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "batch"}}, opset_version=14,
                  training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)

# a MobileNet-style CNN: depthwise-separable blocks (a 3x3 convolution per
# channel, then a 1x1 across them) with batch norm and ReLU6, strided, a
# global average pool and a linear head
torch.manual_seed(7)


def separable(c_in, c_out, stride):
    return [nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False), nn.BatchNorm2d(c_in), nn.ReLU6(),
            nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU6()]


mobile = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(), *separable(16, 24, 1),
                       *separable(24, 32, 2), *separable(32, 48, 1), *separable(48, 64, 2), nn.AdaptiveAvgPool2d(1),
                       nn.Flatten(), nn.Linear(64, 10))
mobile.eval()
torch.onnx.export(mobile, torch.zeros(1, 1, 8, 8), os.path.join(here, "digits_mobilenet.onnx"), input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "batch"}}, opset_version=14,
                  training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
