#!/usr/bin/python3
"""The fate search alone, two builds side by side, on the random-graph table.

Runs build/poet-fate-search (the fast planner's fate search without the
baselines, the bounds or the exact polish) of each build given on every
setting of bench/random_graphs.py (same graphs, same seed), one after the
other, and prints the energies, their ratio, and the MILP's proven optimum
where its cache has one. Changes to the search show here undisturbed by the
polish, whose result depends on the time CBC gets.

usage: bench/fate_search.py OLD_BUILD NEW_BUILD [--graphs=N] [--seed=S] [--seconds=T] [--cache=FILE]
"""
import json
import os
import subprocess
import sys
import tempfile

args = [a for a in sys.argv[1:] if not a.startswith("--")]
opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
if len(args) != 2:
    sys.exit(__doc__.strip().splitlines()[-1])
SECONDS = opts.get("seconds", "4")
CACHE = opts.get("cache", "bench/random_graphs_milp.json")
# the settings come from the table's own script, with its defaults and this build's generator
sys.argv = [sys.argv[0], args[1]] + [f"--{k}={v}" for k, v in opts.items() if k in ("graphs", "seed")]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random_graphs  # noqa: E402


def energy(build, s):
    out = subprocess.run([os.path.join(build, "poet-fate-search"), s["path"], str(s["budget"]), f"{s['factor']:.3f}",
                          SECONDS], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["energy_j"]


def main():
    cache = json.load(open(CACHE)) if os.path.exists(CACHE) else {}
    print(f"fate search alone, {SECONDS} s: {args[0]} (old) against {args[1]} (new)")
    print("| graph | device | budget | factor | old (J) | new (J) | new / old | optimum (J) | new / optimum |")
    print("|---|---|---|---|---|---|---|---|---|")
    better = worse = fits_new = fits_old = 0
    with tempfile.TemporaryDirectory() as tmp:
        for s in random_graphs.settings(tmp):
            old, new = energy(args[0], s), energy(args[1], s)
            m = cache.get(s["key"], {})
            opt = m["energy_j"] if m.get("status") == "optimal" else None
            fits_old += old is not None
            fits_new += new is not None
            if old is not None and new is not None:
                better += new < old * (1 - 1e-9)
                worse += new > old * (1 + 1e-9)
            ratio = f"{new / old:.4f}" if old and new else ""
            vs_opt = f"{new / opt:.4f}" if opt and new else ""
            fmt = lambda x: "none" if x is None else f"{x:.6g}"
            print(f"| {s['graph']} | {s['device']} | {s['budget']} ({s['pct']:.0f}%) | {s['factor']} | {fmt(old)} "
                  f"| {fmt(new)} | {ratio} | {fmt(opt) if opt else ''} | {vs_opt} |", flush=True)
    print(f"\nschedules: old {fits_old}, new {fits_new}; where both: new cheaper on {better}, dearer on {worse}")


if __name__ == "__main__":
    main()
