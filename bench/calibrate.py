#!/usr/bin/python3
"""Costs measured on the board: how well a calibrated profile predicts the
emulated STM32F405's instructions, and what it changes in the plans.

usage: bench/calibrate.py [build/poet] [--firmware build/firmware/poet-firmware.elf] [--dir DIR]

1. For cnn_digits (batch 8), resnet_small (batch 1) and the MobileNet-style
   CNN of tests/data/onnx/digits_mobilenet.onnx (batch 4): calibrate
   (`poet emulate --calibrate`) on the board's RAM budget with the default
   planner (resnet_small with --fused-update: it trains whole on the board
   only so), then again on a paging schedule with the
   first profile as --device (paging's cost is added). Then, under four
   schedules that calibration did not run, `poet emulate --device CAL
   --profile` measures the instructions a step and each op kind's, beside
   the calibrated profile's prediction; and the FLOP profile's (stm32f405)
   prediction of its own schedule at the RAM budget. The four schedules are
   planned with runtime factor 3, so that the baselines find one;
   resnet_small trains on fashion-mnist, the others on digits.
2. For cnn_digits at batch 8, runtime factor 1.2: at each budget, the
   schedule planned with the FLOP profile and the one planned with the
   calibrated profile, both trained on the board; their instructions a step
   measured, and the limit (1.2 x keep-all's instructions, keep-all as the
   calibrated profile predicts it: it does not fit the board at batch 8).

Instructions are QEMU's (-icount shift=0); the emulator does not model
cycles, flash wait states or DMA overlap, and its SD card (semihosting
files) costs a few hundred instructions a transfer of any size.
Prints Markdown tables."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MOBILENET = os.path.join(HERE, "..", "tests", "data", "onnx", "digits_mobilenet.onnx")


def emulate(a, source, batch, budget, planner, device, *extra):
    data = "fashion-mnist" if "resnet_small" in source else "digits"
    cmd = [a.poet, "emulate", *source, "--data", data, "--batch", str(batch), "--budget", budget, "--planner",
           planner, "--device", device, "--steps", "2", "--time-limit", "5", "--no-host", "--test-examples", "0",
           "--quiet", "--json", "--firmware", a.firmware, *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        last = out.stderr.strip().splitlines()
        return None, last[-1] if last else f"exit {out.returncode}"
    return json.loads(out.stdout), ""


def err(p, m):
    return 100.0 * (p / m - 1) if m else 0.0


def accuracy_table(a):
    # resnet_small trains whole on the board only with the update fused into the backward pass
    models = [("cnn_digits", ["--model", "cnn_digits"], 8),
              ("resnet_small", ["--model", "resnet_small", "--fused-update"], 1),
              ("MobileNet-style CNN", ["--onnx", MOBILENET], 4)]
    # schedules the calibration did not run (budget, planner); the first four that fit the board
    schedules = [("ram", "remat-dtr"), ("50%", "remat-dtr"), ("ram", "chen-sqrt"), ("45%", "fast"), ("60%", "fast"),
                 ("50%", "hybrid"), ("40%", "paging"), ("30%", "fast"), ("ram", "hybrid"), ("25%", "fast"),
                 ("20%", "fast"), ("35%", "remat-dtr"), ("30%", "hybrid")]
    print("| model | schedule | recomputations | paged (KiB) | measured instructions/step | calibrated prediction "
          "| error | worst op kind's error | FLOP profile's error |")
    print("|---|---|---|---|---|---|---|---|---|")
    profiles = {}
    for name, source, batch in models:
        first = os.path.join(a.dir, name.replace(" ", "_") + "-1.json")
        cal = os.path.join(a.dir, name.replace(" ", "_") + ".json")
        o, why = emulate(a, source, batch, "ram", "fast", "stm32f405", "--calibrate", first)
        if not o:
            print(f"| {name} | calibration failed: {why} |||||||")
            continue
        flop_err = err(o["predicted_instructions_per_step"], o["instructions_per_step"])
        o, why = emulate(a, source, batch, "ram", "paging", first, "--calibrate", cal)
        if not o:
            cal = first
        profiles[name] = cal
        done = 0
        for budget, planner in schedules:
            if done == 4:
                break
            o, why = emulate(a, source, batch, budget, planner, cal, "--profile", "--runtime-factor", "3")
            if not o:
                continue
            done += 1
            ops = o["op_instructions"]
            worst = max(ops.items(), key=lambda kv: abs(err(kv[1]["predicted"], kv[1]["measured"])))
            print(f"| {name} (batch {batch}) | {planner} at {budget} | {o['recomputations']:.0f} "
                  f"| {o['paged_bytes'] / 1024:.1f} | {o['instructions_per_step']:.0f} "
                  f"| {o['predicted_instructions_per_step']:.0f} "
                  f"| {err(o['predicted_instructions_per_step'], o['instructions_per_step']):+.2f}% "
                  f"| {worst[0]} {err(worst[1]['predicted'], worst[1]['measured']):+.1f}% "
                  f"| {flop_err:+.0f}% (its own schedule at ram) |")
    return profiles


def keep_all_compute(a, cal, batch):
    """Keep-all's kernel instructions a step, as the calibrated profile predicts them."""
    out = subprocess.run([a.poet, "plan", "--model", "cnn_digits", "--batch", str(batch), "--device", cal,
                          "--planner", "keep-all", "--budget", "100%", "--json"], capture_output=True, text=True)
    return json.loads(out.stdout)["compute_time_s"] * json.load(open(cal))["instructions_per_s"]


def kernels(o):
    return sum(v["measured"] for v in o["op_instructions"].values())


def plan_table(a, cal):
    batch, rho = 8, "1.2"
    source = ["--model", "cnn_digits"]
    print(f"\ncnn_digits, batch {batch}, runtime factor {rho}: the FLOP profile's plan (stm32f405) against the "
          "calibrated one's, both measured on the board\n")
    limit = float(rho) * keep_all_compute(a, cal, batch)
    print(f"Kernel instructions against the runtime limit, {rho} x keep-all's {limit / float(rho):.0f}:\n")
    print("| budget | FLOP plan: recomputations, paged KiB | its instructions | its kernels / limit | calibrated plan "
          "| its instructions | its kernels / limit | calibrated / FLOP | same schedule |")
    print("|---|---|---|---|---|---|---|---|---|")
    for budget in ["ram", "70%", "60%", "50%", "45%", "42%", "38%"]:
        f, why = emulate(a, source, batch, budget, "fast", "stm32f405", "--runtime-factor", rho, "--profile")
        c, why2 = emulate(a, source, batch, budget, "fast", cal, "--runtime-factor", rho, "--profile")
        if not f or not c:
            print(f"| {budget} | {why or why2} ||||||||")
            continue
        same = f["recomputations"] == c["recomputations"] and f["paged_bytes"] == c["paged_bytes"]
        print(f"| {budget} | {f['recomputations']:.0f}, {f['paged_bytes'] / 1024:.1f} | {f['instructions_per_step']:.0f} "
              f"| {kernels(f) / limit:.3f} | {c['recomputations']:.0f}, {c['paged_bytes'] / 1024:.1f} "
              f"| {c['instructions_per_step']:.0f} | {kernels(c) / limit:.3f} "
              f"| {c['instructions_per_step'] / f['instructions_per_step']:.3f} | {'yes' if same else 'no'} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("poet", nargs="?", default=os.path.join(HERE, "..", "build", "poet"))
    ap.add_argument("--firmware", default=os.path.join(HERE, "..", "build", "firmware", "poet-firmware.elf"))
    ap.add_argument("--dir")
    a = ap.parse_args()
    a.dir = a.dir or tempfile.mkdtemp()
    os.makedirs(a.dir, exist_ok=True)
    profiles = accuracy_table(a)
    if "cnn_digits" in profiles:
        plan_table(a, profiles["cnn_digits"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
