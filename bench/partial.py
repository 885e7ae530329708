#!/usr/bin/python3
"""What each --train spec costs in memory (issue 16): the training graph's
size, keep-all peak, smallest feasible budget, trained parameters and
persistent state; then one budget for all (half the full graph's keep-all
peak, or the spec's smallest budget where that is more), planned by the
fast planner and trained for a few steps on the digits, reporting the
planned energy against the spec's own full-memory energy and the measured
arena high-water mark.

usage: bench/partial.py POET [MODEL] [BATCH] [DEVICE]"""
import json
import os
import subprocess
import tempfile
import sys

SPECS = ["all", "all+frozen-bn", "all+masks", "biases", "biases+masks", "biases+frozen-bn",
         "biases+frozen-bn+masks", "last:1", "last:3", "last:3+frozen-bn", "ratio:0.5", "ratio:0.5+masks",
         "ratio:0.25+masks"]


def run(args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(args)}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def main():
    poet = sys.argv[1]
    model = sys.argv[2] if len(sys.argv) > 2 else "cnn_digits"
    batch = sys.argv[3] if len(sys.argv) > 3 else "16"
    device = sys.argv[4] if len(sys.argv) > 4 else "m4"
    base = ["--model", model, "--device", device, "--batch", batch]
    graphs = {s: run([poet, "graph", *base, "--train", s, "--json"]) for s in SPECS}
    half = graphs["all"]["keep_all_peak_bytes"] // 2
    print(f"{model}, batch {batch}, on {device}; budget: {half} B (half the full graph's keep-all peak) "
          f"or the spec's smallest feasible budget\n")
    print("| --train | nodes | keep-all peak (B) | smallest budget (B) | trained params (B) | persistent, SGD (B) "
          "| budget (B) | energy / full-memory | planned arena (B) | arena high-water (B) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in SPECS:
        g = graphs[s]
        budget = max(half, g["min_budget_bytes"])
        with tempfile.TemporaryDirectory() as tmp:
            plan = os.path.join(tmp, "plan.json")
            p = run([poet, "plan", "--runtime-model", "compute", *base, "--train", s, "--budget", str(budget), "--time-limit", "10", "--json",
                     "--quiet", "--deterministic", "--out", plan])
            t = run([poet, "train", *base, "--train", s, "--schedule", plan, "--data", "digits", "--steps", "5",
                     "--json", "--quiet"])
        ratio = p["energy_j"] / p["full_memory_energy_j"]
        print(f"| {s} | {g['nodes']} | {g['keep_all_peak_bytes']} | {g['min_budget_bytes']} | {g['gradient_bytes']:.0f} "
              f"| {g['persistent_bytes']:.0f} | {budget} | {ratio:.4f}x | {p['placed_peak_bytes']} "
              f"| {t['arena_peak_bytes']} |")


if __name__ == "__main__":
    main()
