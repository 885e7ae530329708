#!/usr/bin/python3
"""Training throughput on one thread, poet beside PyTorch, in one run.

For each model (resnet_small, cnn_fashion; batch 32; SGD with momentum),
alternates poet (`poet train --planner keep-all --steps N`, its
host_step_seconds) and PyTorch 1.13 (Debian's python3-torch, float32,
torch.set_num_threads(1), the same model from bench/torch_models.py, random
data of the same shape, after a warm-up) REPEATS times, and prints the
medians and their ratio as markdown. Takes about 3 minutes on 2 cores.

usage: bench/throughput.py [build/poet] [--steps N] [--repeats R] > table.md
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from torch_models import MODELS  # noqa: E402

BATCH = 32


def poet_step_seconds(poet, model, steps):
    out = subprocess.run([poet, "train", "--model", model, "--device", "m4", "--budget", "100%", "--planner",
                          "keep-all", "--steps", str(steps), "--json", "--quiet"], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"poet train failed: {out.stderr.strip()}")
    return json.loads(out.stdout)["host_step_seconds"] / steps


def torch_step_seconds(model_name, steps):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = MODELS[model_name]()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.rand(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(10):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("poet", nargs="?", default="build/poet")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print(f"| model, batch {BATCH}, one thread | poet ms/step (median of {a.repeats}) | PyTorch {torch.__version__} "
          "ms/step (median) | poet / PyTorch time |")
    print("|---|---|---|---|")
    for model in ["resnet_small", "cnn_fashion"]:
        p, t = [], []
        for _ in range(a.repeats):
            p.append(poet_step_seconds(a.poet, model, a.steps))
            t.append(torch_step_seconds(model, a.steps))
        mp, mt = statistics.median(p), statistics.median(t)
        print(f"| {model} | {1e3 * mp:.1f} ({', '.join(f'{1e3 * v:.1f}' for v in p)}) | {1e3 * mt:.1f} "
              f"({', '.join(f'{1e3 * v:.1f}' for v in t)}) | {mp / mt:.2f}x |")


if __name__ == "__main__":
    main()
