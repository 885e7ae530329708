#!/usr/bin/python3
"""Which of torchvision's classifiers poet imports from ONNX, and how the
planner does on the ones named with --plan.

usage: bench/onnx_zoo.py [build/poet] [--dir DIR] [--plan NAME,...] [--budget 50%] [--device m4]
                         [--time-limit 60] > table.md

Exports each model (10 classes, random weights, bench/onnx_planning.py's
export: opset 14, batch norm kept, a dynamic batch) into DIR (a temporary
one by default; files already there are reused), runs `poet graph --onnx F
--batch 8 --device m4 --json`, and prints a Markdown row per model: its
node count and keep-all peak, or poet's one-line refusal. Models named in
--plan are then planned with `poet plan --onnx F --batch 8 --device D
--budget B --time-limit T` (the fast planner) and timed, with their peak
memory (GNU time)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_planning import export  # noqa: E402

MODELS = ["alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_s", "googlenet",
          "inception_v3", "mnasnet0_5", "mnasnet1_0", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
          "regnet_x_400mf", "regnet_y_400mf", "resnet18", "resnet50", "resnext50_32x4d", "shufflenet_v2_x0_5",
          "shufflenet_v2_x1_0", "squeezenet1_0", "squeezenet1_1", "swin_t", "vgg11", "vit_b_16", "wide_resnet50_2"]


def exported(name, workdir):
    path = os.path.join(workdir, name + ".onnx")
    if not os.path.exists(path):
        extra = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
        model = getattr(torchvision.models, name)(num_classes=10, **extra)
        export(model, (1, 3, 299, 299) if name == "inception_v3" else (1, 3, 224, 224), path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("poet", nargs="?", default="build/poet")
    ap.add_argument("--dir")
    ap.add_argument("--plan", default="")
    ap.add_argument("--budget", default="50%")
    ap.add_argument("--device", default="m4")
    ap.add_argument("--time-limit", default="60")
    a = ap.parse_args()
    workdir = a.dir or tempfile.mkdtemp()
    print("| model | imported | nodes | keep-all peak (MB) |")
    print("|---|---|---|---|")
    imported = 0
    for name in MODELS:
        g = subprocess.run([a.poet, "graph", "--onnx", exported(name, workdir), "--batch", "8", "--device", "m4",
                            "--json"], capture_output=True, text=True)
        if g.returncode:
            print(f"| {name} | no: {g.stderr.strip().splitlines()[-1]} | | |", flush=True)
            continue
        imported += 1
        j = json.loads(g.stdout)
        print(f"| {name} | yes | {j['nodes']} | {j['keep_all_peak_bytes'] / 1e6:.1f} |", flush=True)
    print(f"\n{imported} of {len(MODELS)} imported\n")
    plans = [m for m in a.plan.split(",") if m]
    if not plans:
        return
    print(f"| model | device | budget | status | energy / full-memory | gap | found (s) | wall (s) | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in plans:
        r = subprocess.run(["/usr/bin/time", "-f", "rss %M wall %e", a.poet, "plan", "--runtime-model", "compute", "--onnx", exported(name, workdir),
                            "--batch", "8", "--device", a.device, "--budget", a.budget, "--time-limit", a.time_limit,
                            "--json", "--quiet"], capture_output=True, text=True)
        t = r.stderr.strip().splitlines()[-1].split()
        p = json.loads(r.stdout) if r.stdout.startswith("{") else {"status": f"failed: {r.stderr.strip()[:120]}"}
        e = p.get("energy_j")
        print(f"| {name} | {a.device} | {a.budget} | {p['status']} | "
              f"{e / p['full_memory_energy_j']:.4f}x | {100 * p['gap']:.3f}% | {p['found_seconds']:.1f} | "
              f"{float(t[3]):.1f} | {int(t[1]) / 1024:.0f} |" if e else f"| {name} | {a.device} | {a.budget} | "
              f"{p['status']} | | | | {float(t[3]):.1f} | {int(t[1]) / 1024:.0f} |", flush=True)


main()
