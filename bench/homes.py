#!/usr/bin/python3
"""The smallest whole RAM in which each model trains on a board, with every
parameter copied into RAM (--frozen ram, poet before parameter homes), with
the frozen ones read in place from flash (--frozen flash, the default), and
with that and the update fused into the backward pass (--fused-update: one
layer's gradients in RAM at a time); and whether the parameters fit the
board's flash at all.

usage: bench/homes.py [build/poet] [--device stm32f405] [--batch 1] [--dir DIR]

Models: cnn_digits, resnet_small, and mlp_digits_wide and mlp_fashion (whose
weights alone exceed the board's RAM) from the zoo, the MobileNet-style CNN of
tests/data/onnx/digits_mobilenet.onnx, and torchvision's mobilenet_v3_small
(10 classes, batch norm kept, its first convolution made 1-channel for a
1x32x32 input; exported into DIR with bench/onnx_planning.py's export). For
each spec (all, last:2, biases) `poet fit --batch B --train SPEC --frozen
WHERE --json` gives the whole RAM: the firmware's part, what training keeps
beside the activations (resident parameters, gradients, optimizer state,
statistics, the batch, workspace, control) and the arena of the schedule at
the smallest budget its planner meets. Then, at a batch where the arena
binds (32; resnet_small 2), on the m4 profile with 192 KiB and 256 KiB of
RAM, the energy of a step planned in the
arena the RAM leaves beside what training keeps (--runtime-factor 1.5,
--runtime-model compute), against the full-memory energy. Reading a
frozen parameter in place is priced as reading it from RAM: the profiles
state no flash read cost. Prints Markdown tables."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SPECS = ["all", "last:2", "biases"]


def mobilenet_v3_small(workdir):
    path = os.path.join(workdir, "mobilenet_v3_small_1x32x32.onnx")
    if not os.path.exists(path):
        import torch
        import torchvision
        sys.path.insert(0, HERE)
        from onnx_planning import export
        torch.manual_seed(0)
        m = torchvision.models.mobilenet_v3_small(num_classes=10)
        first = m.features[0][0]
        m.features[0][0] = torch.nn.Conv2d(1, first.out_channels, first.kernel_size, first.stride, first.padding,
                                           bias=False)
        export(m, (1, 1, 32, 32), path)
    return path


def fit(poet, source, device, batch, spec, frozen, fused=False):
    out = subprocess.run([poet, "fit", *source, "--device", device, "--batch", str(batch), "--train", spec,
                          "--frozen", frozen, "--time-limit", "5", "--json", *(["--fused-update"] if fused else [])],
                         capture_output=True, text=True)
    if out.returncode:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    return json.loads(out.stdout)["fits"][0], ""


def energy(poet, source, batch, spec, frozen, ram, fused=False):
    """The energy of a step at the arena RAM leaves (m4), over the full-memory energy, or why there is none."""
    row, why = fit(poet, source, "m4", batch, spec, frozen, fused)
    if not row:
        return why
    beside = row["ram_total_bytes"] - row["arena_bytes"]
    if beside >= ram:
        return f"no room: {beside / 1024:.1f} KiB beside the arena"
    budget = (ram - beside) // 8 * 8
    out = subprocess.run([poet, "plan", *source, "--device", "m4", "--batch", str(batch), "--train", spec,
                          "--budget", str(budget), "--runtime-factor", "1.5", "--runtime-model", "compute",
                          "--time-limit", "10", "--deterministic", "--json", "--quiet"],
                         capture_output=True, text=True)
    if out.returncode:
        return f"infeasible in {budget / 1024:.1f} KiB"
    p = json.loads(out.stdout)
    return f"{p['energy_j'] / p['full_memory_energy_j']:.4f}x ({budget / 1024:.1f} KiB arena)"


def params_bytes(poet, source, device, batch):
    g = json.loads(subprocess.run([poet, "graph", *source, "--device", device, "--batch", str(batch), "--json"],
                                  check=True, capture_output=True, text=True).stdout)
    return g["parameter_bytes"]


def kib(b):
    return f"{b / 1024:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("poet", nargs="?", default="build/poet")
    ap.add_argument("--device", default="stm32f405")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--dir")
    a = ap.parse_args()
    workdir = a.dir or tempfile.mkdtemp()
    # (name, source, the batch of the energy table; None: its parameters fit no board's flash yet)
    models = [("cnn_digits", ["--model", "cnn_digits"], 32), ("resnet_small", ["--model", "resnet_small"], 2),
              ("mlp_digits_wide", ["--model", "mlp_digits_wide"], 32), ("mlp_fashion", ["--model", "mlp_fashion"], 32),
              ("MobileNet-style CNN", ["--onnx", os.path.join(HERE, "..", "tests", "data", "onnx", "digits_mobilenet.onnx")],
               32),
              ("mobilenet_v3_small 1x32x32", ["--onnx", mobilenet_v3_small(workdir)], None)]
    print(f"Device {a.device}, batch {a.batch}: the smallest whole RAM (KiB) a schedule trains in, and whether it fits\n")
    print("| model | parameters (KiB) | --train | all in RAM (before) | frozen in flash (after) "
          "| ... and --fused-update | read in place (KiB) |")
    print("|---|---|---|---|---|---|---|")
    for name, source, _ in models:
        weights = params_bytes(a.poet, source, a.device, a.batch)
        for spec in SPECS:
            cells = []
            rows = {}
            for frozen, fused in (("ram", False), ("flash", False), ("flash", True)):
                row, why = fit(a.poet, source, a.device, a.batch, spec, frozen, fused)
                rows.setdefault(frozen, row)
                if not row:
                    cells.append(f"refused: {why}")
                elif not row["planned"]:
                    cells.append(f"no: {row.get('why', '')}")
                else:
                    cells.append(f"{kib(row['ram_total_bytes'])} ({'fits' if row['fits'] else 'does not fit'})")
            before, after = rows["ram"], rows["flash"]
            saved = before["persistent_bytes"] - after["persistent_bytes"] if before and after else 0
            print(f"| {name} | {kib(weights)} | {spec} | {' | '.join(cells)} | {kib(saved)} |", flush=True)
    print("\nm4 profile: energy of a step / full-memory energy, in the arena the RAM leaves\n")
    print("| model | batch | --train | 192 KiB, all in RAM | 192 KiB, frozen in flash | ... and fused "
          "| 256 KiB, all in RAM | 256 KiB, frozen in flash | ... and fused |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, source, batch in models:
        for spec in SPECS if batch else []:
            cells = [energy(a.poet, source, batch, spec, frozen, kb * 1024, fused)
                     for kb in (192, 256) for frozen, fused in (("ram", False), ("flash", False), ("flash", True))]
            print(f"| {name} | {batch} | {spec} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
