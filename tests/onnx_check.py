"""ONNX in and out against PyTorch (Debian's python3-torch and python3-onnx).

For each model below: build it in PyTorch with random weights (batch norm
statistics and layer norm parameters included), export it with
torch.onnx.export, have poet import it (tests/onnx_dump.c), and compare
  - the logits in inference mode with PyTorch's (model.eval());
  - the loss of one training step (model.train()) and every parameter's
    gradient, read back from the ONNX file poet writes with the gradients
    in place of the weights;
  - after three SGD steps in poet, the trained ONNX model loaded back into
    PyTorch: its logits in inference mode against poet's.
PyTorch computes in float64 from the same float32 weights, so the
differences are poet's float32 rounding alone. Tolerance: torch_check's,
|poet - torch| <= ATOL + RTOL |torch| elementwise.

usage: onnx_check.py ONNX_DUMP WORKDIR; prints one line per model and
"N passed, N failed"."""
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

from torch_check import close  # the same tolerance: ATOL + RTOL |torch|


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c, 3, 1, 1),
                               nn.BatchNorm2d(c))

    def forward(self, x):
        return torch.relu(self.a(x) + x)


class SqueezeExcite(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.f = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, 4, 1), nn.ReLU(), nn.Conv2d(4, c, 1),
                               nn.Hardsigmoid())

    def forward(self, x):
        return x * self.f(x)


class PoolMean(nn.Module):
    """SqueezeNet's pooling (ceil_mode) and MnasNet's mean over H and W."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 6, 3), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
                               nn.Conv2d(6, 8, 1))
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        return self.head(self.f(x).mean([2, 3]))


class Tokens(nn.Module):
    """A transformer encoder layer (exact GELU) and a per-token classifier."""

    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        return self.head(self.enc(x))


class TinyViT(nn.Module):
    """torchvision's VisionTransformer in small, as it exports: patches by a
    strided convolution, a trained class token broadcast over the batch
    (Expand) and concatenated before them, a trained position embedding, a
    pre-norm encoder layer, and the class token's output (Gather) classified."""

    def __init__(self, dim=16):
        super().__init__()
        self.patch = nn.Conv2d(1, dim, 4, 4)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, 5, dim))
        self.enc = nn.TransformerEncoderLayer(dim, 2, 2 * dim, dropout=0.0, activation="gelu", batch_first=True,
                                              norm_first=True)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.enc(x))[:, 0])


class ExpandedScale(nn.Module):
    """A trained scale broadcast over the batch by Expand before it
    multiplies: still trained (folded, it would be a constant)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1, 64))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(x * self.scale.expand(x.shape[0], -1))


class UpsampleSkip(nn.Module):
    """A U-Net's decoder step: the pooled branch brought back to the skip
    connection's size by nn.Upsample (nearest, by 2) and by F.interpolate
    to a size (both exported as Resize), then concatenated with it."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), nn.ReLU())
        self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(4, 4, 3, 1, 1), nn.ReLU())
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec = nn.Conv2d(12, 4, 3, 1, 1)
        self.head = nn.Linear(4, 10)

    def forward(self, x):
        e = self.enc(x)
        d = self.down(e)
        u = torch.cat([e, self.up(d), nn.functional.interpolate(d, size=(8, 8))], 1)
        return self.head(torch.relu(self.dec(u)).mean([2, 3]))


class Sensor1d(nn.Module):
    """A 1-d CNN over a 3-axis accelerometer's samples, as activity
    recognition and keyword spotting use on microcontrollers: a padded
    Conv1d, BatchNorm1d, MaxPool1d, a strided, dilated, grouped Conv1d,
    LeakyReLU, Mish (Softplus, Tanh, Mul), ELU, PReLU, AvgPool1d,
    AdaptiveAvgPool1d."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv1d(3, 8, 5, padding=2), nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(2),
                               nn.Conv1d(8, 8, 3, stride=2, padding=2, dilation=2, groups=2), nn.LeakyReLU(0.1),
                               nn.Conv1d(8, 8, 1), nn.Mish(), nn.Conv1d(8, 8, 1), nn.ELU(0.7), nn.PReLU(8),
                               nn.AvgPool1d(2), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(8, 6))

    def forward(self, x):
        return self.f(x)


class MnistExample(nn.Module):
    """PyTorch's MNIST example in small, ending with log_softmax (trained
    there with nll_loss): poet's loss takes the LogSoftmax over, and its
    logits are compared after a log_softmax of their own."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 8, 3, 1), nn.Conv2d(8, 16, 3, 1)
        self.fc1, self.fc2 = nn.Linear(16 * 2 * 2, 32), nn.Linear(32, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv2(torch.relu(self.conv1(x)))), 2)
        return nn.functional.log_softmax(self.fc2(torch.relu(self.fc1(torch.flatten(x, 1)))), dim=1)


class GroupNormCNN(nn.Module):
    """GroupNorm, which on-device training uses where a batch is too small
    for batch norm (exported as InstanceNormalization between reshapes,
    its affine as Mul and Add), over [N, C, H, W] and [N, C, L], and
    InstanceNorm2d without affine and with (its scale and bias trained)."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.GroupNorm(4, 8), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1),
                               nn.InstanceNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 1), nn.InstanceNorm2d(8, affine=True),
                               nn.Flatten(2), nn.GroupNorm(2, 8), nn.Flatten(),
                               nn.Linear(8 * 16, 10))

    def forward(self, x):
        return self.f(x)


class SamePadding(nn.Module):
    """Keras' "same" padding as converters write it: Conv with auto_pad
    SAME_UPPER (the odd unit of padding at the end) and SAME_LOWER (at the
    beginning), stride 2. PyTorch pads explicitly (ZeroPad2d); the export is
    rewritten to auto_pad (same_padding below) and compared with it."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(1, 4, 3, 2), nn.ReLU(),
                               nn.ZeroPad2d((1, 0, 1, 0)), nn.Conv2d(4, 4, 3, 2), nn.ReLU(), nn.Flatten(),
                               nn.Linear(16, 10))

    def forward(self, x):
        return self.f(x)


def same_padding(path):
    """Each Pad before a Conv goes, and the Conv pads itself: SAME_UPPER for
    the first, SAME_LOWER for the second (SamePadding's)."""
    m = onnx.load(path)
    pads = [n for n in m.graph.node if n.op_type == "Pad"]
    for pad, mode in zip(pads, ["SAME_UPPER", "SAME_LOWER"]):
        conv = next(n for n in m.graph.node if n.op_type == "Conv" and n.input[0] == pad.output[0])
        conv.input[0] = pad.input[0]
        kept = [a for a in conv.attribute if a.name != "pads"]
        del conv.attribute[:]
        conv.attribute.extend(kept + [onnx.helper.make_attribute("auto_pad", mode)])
        m.graph.node.remove(pad)
    onnx.save(m, path)


class KeywordTransformer(nn.Module):
    """A keyword-spotting transformer over MFCC frames, sequence first as
    nn.TransformerEncoder's default, with a learned position embedding and
    the tokens' mean (ReduceMean over the sequence axis) classified."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(10, 16)
        self.pos = nn.Parameter(torch.zeros(6, 1, 16))
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0), 2)
        self.head = nn.Linear(16, 12)

    def forward(self, x):
        return self.head(self.enc(self.proj(x).transpose(0, 1) + self.pos).mean(0))


class ShuffleDense(nn.Module):
    """ShuffleNet's channel shuffle (a 5-d Reshape and Transpose), zero
    padding before a convolution and before average pools (Pad), and
    DenseNet's concatenation of many inputs (more than poet's 8 a node)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.ZeroPad2d((1, 0, 2, 1)), nn.Conv2d(1, 8, 3), nn.ReLU())
        self.group = nn.Conv2d(8, 8, 1, groups=2)
        self.pool = nn.AvgPool2d(3, 1, padding=1)
        self.grow = nn.ModuleList(nn.Conv2d(8 + 2 * k, 2, 1) for k in range(10))
        self.head = nn.Linear(28 * 4 * 3, 10)

    def forward(self, x):
        x = self.group(self.stem(x))
        n, c, h, w = x.shape
        x = self.pool(x.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w))
        feats = [x]
        for conv in self.grow:
            feats.append(torch.relu(conv(torch.cat(feats, 1))))
        x = nn.functional.avg_pool2d(torch.cat(feats, 1), 2)
        return self.head(x.flatten(1))


def models():
    return [
        ("digits_mlp", nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)), (6, 64)),
        ("cnn_bn_residual", nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(), Residual(8),
                                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10)), (4, 1, 8, 8)),
        ("depthwise_separable", nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU6(),
                                              nn.Conv2d(8, 8, 3, 2, 1, groups=8), nn.BatchNorm2d(8), nn.ReLU6(),
                                              nn.Conv2d(8, 16, 1), nn.BatchNorm2d(16), nn.Hardswish(),
                                              SqueezeExcite(16), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                              nn.Linear(16, 10)), (4, 1, 8, 8)),
        ("transformer_layer", Tokens(), (3, 5, 16)),
        ("ceil_pool_mean", PoolMean(), (4, 1, 10, 10)),
        ("shuffle_pad_dense", ShuffleDense(), (4, 1, 8, 8)),
        ("vit", TinyViT(), (4, 1, 8, 8)),
        ("expanded_scale", ExpandedScale(), (6, 64)),
        ("upsample_skip", UpsampleSkip(), (4, 1, 8, 8)),
        ("sensor_1d", Sensor1d(), (4, 3, 32)),
        ("mnist_example", MnistExample(), (4, 1, 8, 8)),
        ("group_norm", GroupNormCNN(), (4, 1, 8, 8)),
        ("same_padding", SamePadding(), (4, 1, 8, 8)),
        ("keyword_transformer", KeywordTransformer(), (3, 6, 10)),
    ]


# exports rewritten the way other converters write them
REWRITE = {"same_padding": same_padding}


# models whose output ends with a LogSoftmax that poet's loss takes over: poet's logits are the input of it
LOG_PROBS = {"mnist_example"}


def randomize(model, gen):
    """Weights away from their initial values, so that no two initializers
    are equal (the exporter would merge them) and statistics matter."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=gen) * 0.1)
            elif name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=gen) + 0.5)


def export(model, shape, path):
    model.eval()
    names = {"x": {0: "batch"}}
    torch.onnx.export(model, torch.zeros(shape), path, input_names=["x"], output_names=["y"], dynamic_axes=names,
                      opset_version=14, training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def match(model, inits):
    """Which PyTorch tensor each initializer holds, and whether transposed."""
    tensors = dict(model.named_parameters())
    tensors.update({k: v for k, v in model.named_buffers() if "running" in k})
    found = {}
    for name, value in inits.items():
        for pname, p in tensors.items():
            v = p.detach().numpy()
            if v.shape == value.shape and np.array_equal(v, value):
                found[name] = (pname, False)
                break
            if value.ndim == 2 and v.shape == value.T.shape and np.array_equal(v, value.T):
                found[name] = (pname, True)
                break
    return found


def logits_of(model, x):
    out = model(x)
    return out.reshape(-1, out.shape[-1])


def poet_out(name, path, classes):
    """poet's logits as the model's output: log-probabilities where the
    model ends with a LogSoftmax that the loss took over."""
    z = np.fromfile(path, dtype=np.float32)
    if name not in LOG_PROBS:
        return z
    return torch.log_softmax(torch.from_numpy(z.astype(np.float64)).reshape(-1, classes), 1).numpy().ravel()


def check(dump, workdir, name, model, shape, gen):
    randomize(model, gen)
    if name == "depthwise_separable":  # two equal biases: the exporter shares one through Identity
        with torch.no_grad():
            model[4].bias.copy_(model[1].bias)
    path = os.path.join(workdir, name + ".onnx")
    export(model, shape, path)
    if name in REWRITE:
        REWRITE[name](path)
    found = match(model, initializers(path))
    x = torch.randn(shape, generator=gen)
    ref64 = model.double()
    rows, classes = logits_of(ref64.eval(), x.double()).shape
    y = torch.randint(0, classes, (rows,), generator=gen)
    out = os.path.join(workdir, name)
    os.makedirs(out, exist_ok=True)
    x.numpy().astype(np.float32).tofile(os.path.join(out, "x.bin"))
    y.numpy().astype(np.int32).tofile(os.path.join(out, "y.bin"))
    run = subprocess.run([dump, path, str(shape[0]), os.path.join(out, "x.bin"), os.path.join(out, "y.bin"), out],
                         capture_output=True, text=True)
    if run.returncode:
        print(f"{name}: onnx_dump failed: {run.stderr.strip()}")
        return False
    failures, worst = [], 0.0

    def compare(what, poet, ref):
        nonlocal worst
        ok, e = close(poet, ref)
        worst = max(worst, e)
        if not ok:
            failures.append(f"{what}: max error {e:.3g}")

    with torch.no_grad():
        compare("inference logits", poet_out(name, os.path.join(out, "eval_logits.bin"), classes),
                logits_of(ref64.eval(), x.double()))
    ref64.train()
    ref64.zero_grad()
    loss = torch.nn.functional.cross_entropy(logits_of(ref64, x.double()), y)
    loss.backward()
    compare("loss", [float(open(os.path.join(out, "loss.txt")).read())], [float(loss)])
    params = dict(ref64.named_parameters())
    grads = initializers(os.path.join(out, "grads.onnx"))
    checked = 0
    for init, (pname, transposed) in found.items():
        if pname not in params:
            continue
        g = params[pname].grad.numpy()
        compare(f"gradient of {pname}", grads[init], g.T if transposed else g)
        checked += 1
    # a parameter the exporter merged into another's initializer (through
    # Identity) comes back as an initializer of its own, named after it
    merged = [n for n in grads if n not in found and n in params]
    for pname in merged:
        compare(f"gradient of {pname} (merged at export)", grads[pname], params[pname].grad.numpy())
        checked += 1
    if name == "depthwise_separable" and not merged:
        failures.append("the exporter merged no initializers: the Identity path went untested")
    if checked != len(params):
        failures.append(f"{checked} of {len(params)} parameters found among the initializers")
    # the trained model, loaded back into PyTorch, gives poet's logits
    trained = initializers(os.path.join(out, "trained.onnx"))
    onnx.checker.check_model(onnx.load(os.path.join(out, "trained.onnx")))
    state = dict(ref64.state_dict())
    with torch.no_grad():
        for init, (pname, transposed) in found.items():
            v = torch.from_numpy(trained[init].T.copy() if transposed else trained[init].copy()).double()
            state[pname] = v
        for pname in merged:
            state[pname] = torch.from_numpy(trained[pname].copy()).double()
        ref64.load_state_dict(state)
        compare("trained model's logits in PyTorch", poet_out(name, os.path.join(out, "trained_logits.bin"), classes),
                logits_of(ref64.eval(), x.double()))
    print(f"{name}: loss {float(loss):.6f}, {checked} parameter gradients ({len(merged)} merged at export), "
          f"largest absolute difference {worst:.3g}")
    for f in failures:
        print(f"  FAILED: {f}")
    return not failures


def main():
    torch.set_num_threads(1)
    dump, workdir = sys.argv[1], sys.argv[2]
    gen = torch.Generator().manual_seed(20261204)
    results = [check(dump, workdir, name, model, shape, gen) for name, model, shape in models()]
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
