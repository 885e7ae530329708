#!/usr/bin/python3
"""The fast planner on random training graphs, beside the MILP's proven optima.

The graphs come from build/poet-random-graph (bench/random_graphs.c): five
kinds (residual, branch, attention, unet, dag), graph seeds 1..N per kind,
10-60 nodes each, alternately on the m4 and the a72 profile. Each graph gets
two settings drawn by this script's seed (printed): a tight budget in the
lower half of [smallest feasible, 70% of the keep-all peak] and a loose one
in the upper half, each with a runtime factor drawn from [1.0, 1.5].

Each setting runs `poet plan --planner fast --time-limit FAST` (default 10 s)
and `poet plan --planner milp --time-limit MILP` (default 600 s); the MILP's
answers are cached in --cache (JSON, keyed by graph and setting), since they
do not change when fast does. Prints a markdown table and the issue's
targets: where the MILP proved optimality, fast within 1% of the optimum and
a certified gap <= 1% within its limit, and the MILP's time to prove its
optimum against fast's time when it returns the same energy (to 1e-6), both
as each planner's own time and as each process's wall time.

usage: bench/random_graphs.py [build] [--graphs=N] [--seed=S] [--fast=SECONDS]
                              [--milp=SECONDS] [--jobs=J] [--cache=FILE] [--no-milp | --milp-only]
--milp-only fills the cache and prints no table (fast is not run).
"""
import concurrent.futures
import json
import os
import random
import subprocess
import sys
import tempfile
import time

args = [a for a in sys.argv[1:] if not a.startswith("--")]
opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
BUILD = args[0] if args else "build"
POET = os.path.join(BUILD, "poet")
GEN = os.path.join(BUILD, "poet-random-graph")
PER_KIND = int(opts.get("graphs", 8))
SEED = int(opts.get("seed", 2026))
FAST_LIMIT = float(opts.get("fast", 10))
MILP_LIMIT = float(opts.get("milp", 600))
JOBS = int(opts.get("jobs", 1))
CACHE = opts.get("cache", "bench/random_graphs_milp.json")
WITH_MILP = "--no-milp" not in sys.argv
MILP_ONLY = "--milp-only" in sys.argv
RETIME, REPEAT = 1.0, 9
KINDS = ["residual", "branch", "attention", "unet", "dag"]


def run_json(cmd):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        r = json.loads(out.stdout)
    except json.JSONDecodeError:
        r = {"status": f"failed (exit {out.returncode}): {out.stderr.strip()[:200]}", "energy_j": None, "gap": None}
    r["wall_s"] = wall
    return r


def plan(instance, s, planner, limit):
    # the MILP runs to a proof (--gap 0); fast stops at its default gap
    gap = ["--gap", "0"] if planner == "milp" else []
    return run_json([POET, "plan", "--runtime-model", "compute", "--instance", instance, "--budget", str(s["budget"]), "--runtime-factor",
                     f"{s['factor']:.3f}", "--planner", planner, "--time-limit", str(limit), "--json", "--quiet",
                     "--deterministic", "--allow-infeasible"] + gap)


def settings(tmp):
    """Every graph's file and its two settings, drawn from SEED."""
    rng = random.Random(SEED)
    out = []
    for seed in range(1, PER_KIND + 1):
        for kind in KINDS:
            device = "m4" if seed % 2 else "a72"
            path = os.path.join(tmp, f"{kind}_{seed}_{device}.json")
            subprocess.run([GEN, kind, str(seed), device, path], check=True, capture_output=True)
            g = run_json([POET, "graph", "--instance", path, "--json"])
            lo, hi = g["min_budget_bytes"], max(g["min_budget_bytes"], int(0.7 * g["keep_all_peak_bytes"]))
            for half in (0, 1):
                u = rng.uniform(0.5 * half, 0.5 + 0.5 * half)
                budget = int(lo + u * (hi - lo))
                factor = round(rng.uniform(1.0, 1.5), 3)
                out.append({"graph": f"{kind}_{seed}", "device": device, "nodes": g["nodes"], "path": path,
                            "budget": budget, "pct": 100 * budget / g["keep_all_peak_bytes"], "factor": factor,
                            "key": f"{kind}_{seed}_{device}_{budget}_{factor:.3f}_{MILP_LIMIT:g}_proof"})
    return out


def speedup(s, f, m):
    """The MILP's time to its proof against fast's time to the same energy: each planner's own time
    (`solve_seconds`), and each process's wall time. Where the MILP proved it within RETIME s, both
    planners run again here, REPEAT times each, one after the other, and the medians count: there a
    few milliseconds of noise or of starting a process weigh. Elsewhere the cached MILP's wall time
    serves for both, a process's start (some 10 ms) being at most 1% of it."""
    if m["wall_s"] >= RETIME:
        return m["wall_s"] / f["solve_seconds"], m["wall_s"] / f["wall_s"]
    runs = {"fast": [], "milp": []}
    for _ in range(REPEAT):
        for planner, limit in (("fast", FAST_LIMIT), ("milp", MILP_LIMIT)):
            r = plan(s["path"], s, planner, limit)
            if "solve_seconds" in r:
                runs[planner].append(r)
            else:
                print(f"{s['key']}: {planner} again: {r['status']}", file=sys.stderr, flush=True)
    if not runs["fast"] or not runs["milp"]:
        return None, None
    t = {k: (median([r["solve_seconds"] for r in v]), median([r["wall_s"] for r in v])) for k, v in runs.items()}
    return t["milp"][0] / t["fast"][0], t["milp"][1] / t["fast"][1]


def same(a, b):
    return a["energy_j"] is not None and b["energy_j"] is not None and abs(a["energy_j"] - b["energy_j"]) <= 1e-6 * b["energy_j"]


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def fmt(x, spec):
    return "" if x is None else format(x, spec)


def main():
    print(f"random graphs: seed {SEED}, {PER_KIND} graphs per kind, fast {FAST_LIMIT:g} s, milp {MILP_LIMIT:g} s, "
          f"{JOBS} job(s) at once", flush=True)
    cache = {}
    if os.path.exists(CACHE):
        with open(CACHE) as f:
            cache = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        todo = settings(tmp)
        with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
            fast = [] if MILP_ONLY else list(pool.map(lambda s: plan(s["path"], s, "fast", FAST_LIMIT), todo))
            # the settings the MILP is likeliest to prove first (the a72's, small graphs), so that a run
            # cut short still adds proven optima to the cache
            missing = sorted((s for s in todo if WITH_MILP and s["key"] not in cache),
                             key=lambda s: (s["device"] != "a72", s["nodes"]))
            for s, m in zip(missing, pool.map(lambda s: plan(s["path"], s, "milp", MILP_LIMIT), missing)):
                cache[s["key"]] = {k: m.get(k) for k in ("status", "energy_j", "lower_bound_j", "wall_s", "found_seconds")}
                with open(CACHE + ".tmp", "w") as f:
                    json.dump(cache, f, indent=1, sort_keys=True)
                os.replace(CACHE + ".tmp", CACHE)
                print(f"{s['key']}: {m['status']}, {m['wall_s']:.1f} s", flush=True)
        # the table inside the directory: the quick settings are planned again, from its graphs
        if MILP_ONLY:
            return
        print("| graph | device | nodes | budget | factor | fast energy / optimum | fast gap | fast s | fast found s "
              "| milp | milp s | milp/fast time | milp/fast wall |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        proven = within = certified = faster = wall_faster = 0
        ratios, wall_ratios = [], []
        for s, f in zip(todo, fast):
            m = cache.get(s["key"], {"status": "not run", "energy_j": None, "wall_s": None})
            opt = m["status"] == "optimal"
            rel = f["energy_j"] / m["energy_j"] if opt and f["energy_j"] is not None else None
            ratio = wall_ratio = None
            if opt:
                proven += 1
                within += rel is not None and rel <= 1.01
                certified += f["gap"] is not None and f["gap"] <= 0.01 and f["wall_s"] <= FAST_LIMIT + 1
                if same(f, m):
                    ratio, wall_ratio = speedup(s, f, m)
                    if ratio is not None:
                        ratios.append(ratio)
                        wall_ratios.append(wall_ratio)
                        faster += ratio >= 10
                        wall_faster += wall_ratio >= 10
            gap = f"{100 * f['gap']:.2f}%" if f.get("gap") is not None else f["status"]
            print(f"| {s['graph']} | {s['device']} | {s['nodes']} | {s['budget']} ({s['pct']:.0f}%) | {s['factor']} "
                  f"| {fmt(rel, '.4f')} | {gap} | {f['wall_s']:.1f} | {fmt(f.get('found_seconds'), '.2f')} "
                  f"| {m['status']} | {fmt(m['wall_s'], '.1f')} | {fmt(ratio, '.0f')} | {fmt(wall_ratio, '.0f')} |",
                  flush=True)
        print()
        print(f"settings: {len(todo)}; the MILP proved optimality on {proven}")
        print(f"  fast within 1% of the optimum: {within} of {proven}")
        print(f"  fast's certified gap <= 1% within {FAST_LIMIT:g} s: {certified} of {proven}")
        if ratios:
            print(f"  MILP time to its proof / fast's time, at the same energy: median {median(ratios):.1f}x, "
                  f">= 10x on {faster} of {len(ratios)}")
            print(f"  the same with each process's wall time: median {median(wall_ratios):.1f}x, "
                  f">= 10x on {wall_faster} of {len(wall_ratios)}")


if __name__ == "__main__":
    main()
