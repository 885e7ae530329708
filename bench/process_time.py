#!/usr/bin/python3
"""What a whole poet process costs, start to exit, for builds side by side.

Where a plan takes a few milliseconds, starting the process weighs as much
as planning. For each build, in rounds that alternate the builds (so that a
slow spell of the shared machine falls on all of them alike), this times
`poet --version`, then on the two random-graph settings where the fast
planner's process was closest to the MILP's (dag_4 on the a72 at 63% and
dag_6 at 40%, BENCHMARKS.md) `poet plan --planner fast --time-limit 10`
and `poet plan --planner milp --time-limit 600 --gap 0`, each with
`--json --quiet --deterministic --allow-infeasible`. Each command is timed
from subprocess.run; the figures are medians over the rounds, with the
planner's own time (`solve_seconds`) beside the wall time.

usage: bench/process_time.py BUILD [BUILD...] [--rounds=N]
Each BUILD holds poet and poet-random-graph; the graphs come from the first.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

builds = [a for a in sys.argv[1:] if not a.startswith("--")]
opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
ROUNDS = int(opts.get("rounds", 31))
# (graph kind, seed, device, budget bytes, runtime factor): the table's settings
SETTINGS = [("dag", 4, "a72", 2536, "1.442"), ("dag", 6, "a72", 1544, "1.000")]
LIMITS = {"fast": ["--time-limit", "10"], "milp": ["--time-limit", "600", "--gap", "0"]}


def timed(cmd):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, out.stdout


def main():
    if not builds:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        graphs = []
        for kind, seed, device, budget, factor in SETTINGS:
            path = os.path.join(tmp, f"{kind}_{seed}.json")
            subprocess.run([os.path.join(builds[0], "poet-random-graph"), kind, str(seed), device, path],
                           check=True, capture_output=True)
            graphs.append((f"{kind}_{seed}", path, budget, factor))
        wall, own = {}, {}
        for _ in range(ROUNDS):
            for b in builds:
                poet = os.path.join(b, "poet")
                wall.setdefault((b, "--version"), []).append(timed([poet, "--version"])[0])
                for name, path, budget, factor in graphs:
                    for planner, limit in LIMITS.items():
                        w, out = timed([poet, "plan", "--runtime-model", "compute", "--instance", path, "--budget", str(budget), "--runtime-factor",
                                        factor, "--planner", planner, "--json", "--quiet", "--deterministic",
                                        "--allow-infeasible"] + limit)
                        wall.setdefault((b, name, planner), []).append(w)
                        own.setdefault((b, name, planner), []).append(json.loads(out)["solve_seconds"])
    ms = lambda xs: 1000 * statistics.median(xs)
    print(f"medians of {ROUNDS} rounds, milliseconds (planner's own time / process wall time)\n")
    print("| build | poet --version | " + " | ".join(f"{g[0]} fast | {g[0]} milp | {g[0]} milp/fast wall"
                                                    for g in graphs) + " |")
    print("|---" * (2 + 3 * len(graphs)) + "|")
    for b in builds:
        cells = [f"{ms(wall[(b, '--version')]):.2f}"]
        for name, *_ in graphs:
            f, m = (b, name, "fast"), (b, name, "milp")
            cells += [f"{ms(own[f]):.1f} / {ms(wall[f]):.1f}", f"{ms(own[m]):.1f} / {ms(wall[m]):.1f}",
                      f"{ms(wall[m]) / ms(wall[f]):.1f}x"]
        print(f"| {b} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
