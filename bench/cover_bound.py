#!/usr/bin/python3
"""The fast planner's three covering bounds alone, against the MILP's proven optima.

Runs build/poet-cover-bound (the aggregate, the staged and the staged-whole
covering bound, each with the same time) on every setting of bench/random_graphs.py (same
graphs, same seed) that the MILP's cache proves optimal, and prints each
bound as a fraction of the optimum. A fraction above 1 (beyond CBC's
tolerance) would be a bound that is not one, and is counted.

usage: bench/cover_bound.py [BUILD] [--graphs=N] [--seed=S] [--seconds=T] [--cache=FILE]
"""
import json
import os
import subprocess
import sys
import tempfile

args = [a for a in sys.argv[1:] if not a.startswith("--")]
opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
BUILD = args[0] if args else "build"
SECONDS = opts.get("seconds", "30")
CACHE = opts.get("cache", "bench/random_graphs_milp.json")
# the settings come from the table's own script, with its defaults and this build's generator
sys.argv = [sys.argv[0], BUILD] + [f"--{k}={v}" for k, v in opts.items() if k in ("graphs", "seed")]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random_graphs  # noqa: E402


def main():
    cache = json.load(open(CACHE))
    print(f"covering bounds alone, {SECONDS} s each, {BUILD}, as a fraction of the MILP's proven optimum")
    print("| graph | device | budget | factor | aggregate | staged | staged whole |")
    print("|---|---|---|---|---|---|---|")
    above = 0
    fmt = lambda x: "none" if x is None else f"{x:.5f}"
    with tempfile.TemporaryDirectory() as tmp:
        for s in random_graphs.settings(tmp):
            m = cache.get(s["key"], {})
            if m.get("status") != "optimal":
                continue
            out = subprocess.run([os.path.join(BUILD, "poet-cover-bound"), s["path"], str(s["budget"]),
                                  f"{s['factor']:.3f}", SECONDS], capture_output=True, text=True, check=True)
            b = json.loads(out.stdout)
            r = [None if b[k] is None else b[k] / m["energy_j"] for k in ("aggregate_j", "staged_j", "staged_whole_j")]
            above += sum(x is not None and x > 1 + 1e-6 for x in r)
            print(f"| {s['graph']} | {s['device']} | {s['budget']} ({s['pct']:.0f}%) | {s['factor']} "
                  f"| {fmt(r[0])} | {fmt(r[1])} | {fmt(r[2])} |", flush=True)
    print(f"\nbounds above the proven optimum: {above}")


if __name__ == "__main__":
    main()
