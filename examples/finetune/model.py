"""The CNN of the fine-tuning example, and the 8x8 digits split as poet
splits them (the first 1437 rows of python3-sklearn's digits to train, the
last 360 to test; pixels 0..16 scaled to [0, 1])."""
import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn


def block(cin, cout):
    return [nn.Conv2d(cin, cout, 3, 1, 1), nn.BatchNorm2d(cout), nn.ReLU()]


def cnn():
    return nn.Sequential(*block(1, 16), *block(16, 16), nn.MaxPool2d(2), *block(16, 32), *block(32, 32), nn.Flatten(),
                         nn.Linear(32 * 4 * 4, 10))


def digits():
    d = load_digits()
    x = torch.tensor(d.data.reshape(-1, 1, 8, 8) / 16.0, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.long)
    return (x[:1437], y[:1437]), (x[1437:], y[1437:])


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def load_onnx_weights(model, path):
    """The initializers of an ONNX file written from this model, back into it."""
    import onnx
    from onnx import numpy_helper
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    state = model.state_dict()
    for name in state:
        if name in inits:
            state[name] = torch.from_numpy(np.array(inits[name]))
    model.load_state_dict(state)
    return model
