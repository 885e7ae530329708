#!/usr/bin/python3
"""poet's milp planner against POET's own formulation, same instances, same
CBC, same run.

For each instance, budget (a percentage of the keep-all peak or bytes) and
runtime factor: poet's milp (joint, remat-only, paging-only), then POET's
formulation as the original code builds it (bench/poet_formulation.py: PuLP
and Debian's CBC), both with the same time limit. Prints a markdown table:
status, energy, certified gap and time of each, and whether the joint
optimum is at most the remat-only and paging-only optima (1e-9 relative).

usage: bench/milp.py [build/poet] [--quick] > table.md
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
POET = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "build/poet"
QUICK = "--quick" in sys.argv
DATA = os.path.join(HERE, "..", "tests", "data", "reference")
LIMIT = 300

CASES = []
for model in ["linear", "transformer"]:
    for device in ["m0", "m4", "a72"]:
        for pct in ["60%", "50%", "45%"] + (["90%"] if model == "transformer" else []):
            for factor in [1.2, 1.5]:
                CASES.append((model, device, pct, factor))
CASES += [("vgg16_cifar", "m4", "60%", 1.5), ("resnet18_cifar", "m4", "737719", 1.5)]


def poet(*args):
    start = time.monotonic()
    out = subprocess.run([POET, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"poet {' '.join(args)}: {out.stderr.strip()}")
    d = json.loads(out.stdout)
    d["wall"] = time.monotonic() - start
    return d


def original(inst, budget, factor):
    out = subprocess.run([os.path.join(HERE, "poet_formulation.py"), inst, str(budget), str(factor), str(LIMIT)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return {"status": "error: " + out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout)


def fmt_e(e):
    return "-" if e is None else f"{e:.6g}"


def main():
    print("| instance | budget | factor | poet milp: status, energy J, gap, s | remat-only J | paging-only J |"
          " joint <= both | POET formulation: status, energy J, s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    violations = 0
    for model, device, pct, factor in CASES:
        inst = os.path.join(DATA, f"{model}__{device}.json")
        args = ["plan", "--runtime-model", "compute", "--instance", inst, "--budget", pct, "--runtime-factor", str(factor), "--planner", "milp",
                "--json", "--quiet", "--time-limit", str(LIMIT)]
        joint = poet(*args)
        remat = poet(*args, "--no-paging")
        paging = poet(*args, "--no-remat")
        ok = "-"
        if joint["energy_j"] is not None:
            worse = [e for e in (remat["energy_j"], paging["energy_j"]) if e is not None and
                     joint["energy_j"] > e * (1 + 1e-9)]
            ok = "no" if worse else "yes"
            violations += bool(worse)
        gap = "-" if joint["gap"] is None else f"{100 * joint['gap']:.3f}%"
        ours = f"{joint['status']}, {fmt_e(joint['energy_j'])}, {gap}, {joint['wall']:.1f}"
        if QUICK:
            theirs = "not run (--quick)"
        else:
            o = original(inst, joint["budget_bytes"], factor)
            secs = o.get("build_seconds", 0) + o.get("solve_seconds", 0)
            theirs = f"{o['status']} ({o.get('sol_status', '')}), {fmt_e(o.get('objective_j'))}, {secs:.1f}"
        print(f"| {model} {device} | {pct} | {factor} | {ours} | {fmt_e(remat['energy_j'])} |"
              f" {fmt_e(paging['energy_j'])} | {ok} | {theirs} |", flush=True)
    print()
    print(f"joint optimum worse than a single-technique optimum: {violations} cases")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
