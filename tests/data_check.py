"""Your own data, end to end, against PyTorch (Debian's python3-torch).

Makes a sensor-style data set in NumPy (three channels of 64 samples: four
classes of waveform, random phase, amplitude and noise), writes the training
set as an .npz (np.savez) and the test set as two .npy files (np.save), and a
1-d CNN in PyTorch that it exports to ONNX. Then trains it twice from the same
initial weights with the same optimizer, batch and epochs:
  - poet train --onnx ... --data train.npz --test-data x.npy --test-labels y.npy,
    under a schedule planned at half of the keep-all peak;
  - PyTorch, ordinary (schedule-free) training;
and checks that poet's test accuracy is within one point of PyTorch's. The
two shuffle differently (each with its own seed), so the figures are not
bit-equal; one point is the tolerance the issue states. Also checks that a
.csv of the same examples trains to the .npz's weights.

usage: data_check.py POET WORKDIR"""
import json
import os
import subprocess
import sys

import numpy as np
import torch
from torch import nn

CLASSES, CHANNELS, LENGTH = 4, 3, 64
TRAIN, TEST, BATCH, EPOCHS, LR = 2400, 1000, 32, 6, 0.05


def sensor_data(rng, n):
    """Sine, square, sawtooth and chirp bursts on a random channel mix."""
    t = np.arange(LENGTH) / LENGTH
    y = rng.integers(0, CLASSES, n)
    x = np.empty((n, CHANNELS, LENGTH), np.float32)
    for i in range(n):
        f = rng.uniform(3, 6)
        phase = rng.uniform(0, 2 * np.pi)
        s = np.sin(2 * np.pi * f * t + phase)
        wave = [s, np.sign(s), 2 * ((f * t + phase / (2 * np.pi)) % 1) - 1,
                np.sin(2 * np.pi * (f * t + 4 * t * t) + phase)][y[i]]
        gain = rng.uniform(0.5, 1.5, CHANNELS)
        x[i] = gain[:, None] * wave[None, :] + rng.normal(0, 0.8, (CHANNELS, LENGTH))
    return x, y.astype(np.int64)


def model():
    return nn.Sequential(nn.Conv1d(CHANNELS, 8, 5, padding=2), nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(2),
                         nn.Conv1d(8, 16, 5, padding=2), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
                         nn.Flatten(), nn.Linear(16 * LENGTH // 4, CLASSES))


def torch_accuracy(m, x, y, xt, yt):
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(EPOCHS):
        m.train()
        order = torch.randperm(len(xs), generator=g)
        for b in range(len(xs) // BATCH):
            idx = order[b * BATCH:(b + 1) * BATCH]
            opt.zero_grad()
            nn.functional.cross_entropy(m(xs[idx]), ys[idx]).backward()
            opt.step()
    m.eval()
    with torch.no_grad():
        return (m(torch.from_numpy(xt)).argmax(1).numpy() == yt).mean()


def poet_train(poet, onnx_path, data, out, *extra):
    cmd = [poet, "train", "--onnx", onnx_path, "--device", "m4", "--budget", "50%", "--batch", str(BATCH),
           "--epochs", str(EPOCHS), "--optimizer", "sgd", "--lr", str(LR), "--data", data, "--json", "--quiet",
           "--onnx-out", out, *extra]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"data_check: {' '.join(cmd)} failed: {run.stderr.strip()}")
    return json.loads(run.stdout)


def main():
    poet, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    x, y = sensor_data(rng, TRAIN)
    xt, yt = sensor_data(rng, TEST)
    np.savez(os.path.join(work, "train.npz"), x=x, y=y)
    np.save(os.path.join(work, "x_test.npy"), xt)
    np.save(os.path.join(work, "y_test.npy"), yt.astype(np.int32))
    with open(os.path.join(work, "train.csv"), "w") as f:
        for i in range(TRAIN):
            f.write(f"{y[i]}," + ",".join(repr(float(v)) for v in x[i].ravel()) + "\n")
    torch.manual_seed(3)
    m = model()
    onnx_path = os.path.join(work, "sensor.onnx")
    m.eval()
    torch.onnx.export(m, torch.zeros(BATCH, CHANNELS, LENGTH), onnx_path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}}, opset_version=14, training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=False)
    test = ["--test-data", os.path.join(work, "x_test.npy"), "--test-labels", os.path.join(work, "y_test.npy")]
    npz = poet_train(poet, onnx_path, os.path.join(work, "train.npz"), os.path.join(work, "npz.onnx"), *test)
    csv = poet_train(poet, onnx_path, os.path.join(work, "train.csv"), os.path.join(work, "csv.onnx"), *test)
    ours = npz["test_accuracy"]
    theirs = torch_accuracy(m, x, y, xt, yt)
    failed = 0
    line = f"sensor CNN on {TRAIN} .npz examples, {EPOCHS} epochs: poet {100 * ours:.2f}% (under a schedule at 50%), " \
           f"PyTorch {100 * theirs:.2f}%"
    if abs(ours - theirs) > 0.01 or theirs < 0.5:
        failed += 1
        print(f"FAIL {line}: more than one point apart (or PyTorch did not learn)")
    else:
        print(f"ok   {line}")
    if csv["weights_sha256"] != npz["weights_sha256"]:
        failed += 1
        print("FAIL the .csv of the same examples trains to other weights than the .npz")
    else:
        print("ok   the .csv of the same examples trains to the .npz's weights")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
