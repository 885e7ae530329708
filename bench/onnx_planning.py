#!/usr/bin/python3
"""The planner on models people import: torchvision's mobilenet_v2 and
resnet50, and a 6-layer transformer encoder (d_model 512, 8 heads, feed-
forward 2048, sequence 128, exact GELU), exported by torch.onnx.export and
imported with --onnx at batch 8, planned by the default planner (fast) at
50% and 30% of the keep-all peak on the m4 and a72 profiles, 120 s each,
two at a time. Prints markdown: nodes, keep-all peak, energy against
full-memory, certified gap, seconds to the schedule and in all.

usage: bench/onnx_planning.py [build/poet] [--jobs N] > table.md
(python3-torchvision; about 15 minutes on 2 cores)"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import tempfile

import torch
import torchvision
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.1, activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 6)
        self.head = nn.Linear(512, 10)

    def forward(self, x):
        return self.head(self.enc(x))


def export(model, shape, path):
    model.eval()
    torch.onnx.export(model, torch.zeros(shape), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}}, opset_version=14, training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=False)


def plan(poet, path, device, budget):
    out = subprocess.run([poet, "plan", "--runtime-model", "compute", "--onnx", path, "--batch", "8", "--device", device, "--budget", budget,
                          "--time-limit", "120", "--json", "--quiet"], capture_output=True, text=True)
    if out.returncode:
        return {"error": out.stderr.strip()}
    return json.loads(out.stdout)


def graph(poet, path):
    out = subprocess.run([poet, "graph", "--onnx", path, "--batch", "8", "--device", "m4", "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("poet", nargs="?", default="build/poet")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    work = tempfile.mkdtemp()
    models = {"mobilenet_v2": (torchvision.models.mobilenet_v2(), (1, 3, 224, 224)),
              "resnet50": (torchvision.models.resnet50(), (1, 3, 224, 224)),
              "transformer_6layer": (Encoder(), (1, 128, 512))}
    paths = {}
    for name, (model, shape) in models.items():
        paths[name] = os.path.join(work, name + ".onnx")
        export(model, shape, paths[name])
    runs = [(m, d, b) for m in models for d in ("m4", "a72") for b in ("50%", "30%")]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        results = list(pool.map(lambda r: plan(a.poet, paths[r[0]], r[1], r[2]), runs))
    print("| model (batch 8) | nodes | keep-all peak (MB) | device | budget | status | energy / full-memory | "
          "gap | schedule found (s) | wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    shapes = {m: graph(a.poet, p) for m, p in paths.items()}
    met = 0
    for (m, d, b), r in zip(runs, results):
        g = shapes[m]
        if "error" in r:
            print(f"| {m} | {g['nodes']} | {g['keep_all_peak_bytes'] / 1e6:.1f} | {d} | {b} | failed: {r['error']} |||||")
            continue
        full = r.get("full_memory_energy_j") or r["energy_j"]
        ok = r["gap"] is not None and r["gap"] <= 0.01 and r["solve_seconds"] <= 120
        met += ok
        print(f"| {m} | {g['nodes']} | {g['keep_all_peak_bytes'] / 1e6:.1f} | {d} | {b} | {r['status']} | "
              f"{r['energy_j'] / full:.4f}x | {100 * r['gap']:.3f}% | {r['found_seconds']:.1f} | "
              f"{r['solve_seconds']:.1f} |")
    print(f"\n{met} of {len(runs)} settings within a certified 1% gap in 120 s")


if __name__ == "__main__":
    main()
