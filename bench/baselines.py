#!/usr/bin/python3
"""Baseline planners on every POET reference instance.

For each instance, budget (100, 70, 50, 30 % of the keep-all peak) and
planner, runs `poet plan --json --out`, then `poet simulate` on the saved
schedule and checks that it reproduces what plan printed. Prints a markdown
table: energy as a ratio to the full-memory energy, and the peak (stage
accounting); "cannot meet" where the planner found no schedule within the
budgets, "infeasible" where the budget is below the graph's proven minimum.

usage: bench/baselines.py [build/poet] > table.md
"""
import json
import os
import subprocess
import sys
import tempfile

POET = sys.argv[1] if len(sys.argv) > 1 else "build/poet"
DATA = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "reference")
MODELS = ["linear", "vgg16", "vgg16_cifar", "resnet18", "resnet18_cifar", "resnet50", "bert", "transformer"]
DEVICES = ["m0", "m4", "a72", "a72nocache"]
BUDGETS = [100, 70, 50, 30]
PLANNERS = ["keep-all", "chen-sqrt", "remat-dtr", "paging", "hybrid", "portfolio"]
FIGURES = ["energy_j", "peak_ram_bytes", "placed_peak_bytes", "compute_time_s", "time_with_paging_s",
           "recomputations", "page_ins", "page_outs"]


def run(*args):
    out = subprocess.run([POET, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"poet {' '.join(args)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def human(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def main():
    print("| instance | budget | " + " | ".join(PLANNERS) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in PLANNERS) + " |")
    mismatches = invalid = over_placed = schedules = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            for device in DEVICES:
                inst = os.path.join(DATA, f"{model}__{device}.json")
                for pct in BUDGETS:
                    cells = []
                    for planner in PLANNERS:
                        out = os.path.join(tmp, "s.json")
                        if os.path.exists(out):
                            os.remove(out)
                        plan = run("plan", "--runtime-model", "compute", "--instance", inst, "--budget", f"{pct}%", "--runtime-factor", "1.5",
                                   "--planner", planner, "--json", "--out", out)
                        if plan["status"] == "infeasible":
                            cells.append("infeasible")
                            continue
                        if plan["status"] != "feasible" and plan["status"] != "optimal":
                            cells.append("cannot meet")
                            continue
                        schedules += 1
                        if not plan["validated"]:
                            invalid += 1
                        if plan["placed_peak_bytes"] > plan["peak_ram_bytes"]:
                            over_placed += 1
                        sim = run("simulate", out, "--json")
                        if any(sim[k] != plan[k] for k in FIGURES):
                            mismatches += 1
                        ratio = plan["energy_j"] / plan["full_memory_energy_j"]
                        cells.append(f"{ratio:.3f}x, {human(plan['peak_ram_bytes'])}")
                    print(f"| {model} {device} | {pct}% | " + " | ".join(cells) + " |")
    print()
    print(f"{schedules} schedules; simulate disagreed with plan on {mismatches}; {invalid} reported unvalidated; "
          f"placement needed more than the stage accounting's peak on {over_placed}")
    return 1 if mismatches or invalid else 0


if __name__ == "__main__":
    sys.exit(main())
