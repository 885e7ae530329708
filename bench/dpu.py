#!/usr/bin/python3
"""Deep partial updating on the 8x8 digits: test accuracy per round and bytes
sent, for full updating, DPU, GCPU, RPU and pruning at several k, over seeds.

usage: bench/dpu.py POET [--seeds 5] [--epochs 10] [--jobs 2] [--svg FILE] [--always-send]
                       [--optimizer sgd|adam] [--lr X] [--global-shares A,B,...]

Runs `poet update --model mlp_digits_wide --json` (10 rounds from 200
training examples, +100 a round; validation: the last 300 training examples;
test: the digits' test set) for every method, k and seed, and prints a
Markdown table: the mean over rounds 2-10 of (accuracy - full updating's),
mean and spread over seeds, and the bytes a round sends. With
--global-shares, only FU, GCPU and DPU at k = 0.01 run, DPU once for each
share A of its metric (A x global + (1 - A) x local contribution)."""
import argparse
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

METHODS = ["full", "dpu", "gcpu", "rpu", "prune"]
KS = [0.005, 0.01, 0.05]
COLORS = {"full": "#000000", "dpu": "#d62728", "gcpu": "#1f77b4", "rpu": "#2ca02c", "prune": "#9467bd"}


def run(poet, method, k, seed, a, share=None):
    cmd = [poet, "update", "--model", "mlp_digits_wide", "--method", method, "--k", str(k), "--seed", str(seed),
           "--epochs", str(a.epochs), "--json"] + (["--always-send"] if a.always_send else [])
    cmd += (["--optimizer", a.optimizer] if a.optimizer else []) + (["--lr", str(a.lr)] if a.lr else [])
    cmd += ["--global-share", str(share)] if share is not None else []
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return (method, k, seed) + (() if share is None else (share,)), json.loads(out)


def vs_full(results, key, seeds):
    """Per seed: the mean over rounds 2-10 of (test accuracy - FU's), in points."""
    return [100 * statistics.mean(r["test_accuracy"] - f["test_accuracy"]
                                  for r, f in zip(results[key(s)]["rounds"][1:], results[("full", 1.0, s)]["rounds"][1:]))
            for s in seeds]


def spread(d):
    return f"{statistics.mean(d):+.2f} ({min(d):+.2f}, {max(d):+.2f})"


def share_sweep(a, seeds, shares):
    jobs = [("full", 1.0, s, a) for s in seeds] + [("gcpu", 0.01, s, a) for s in seeds]
    jobs += [("dpu", 0.01, s, a, x) for x in shares for s in seeds]
    with ThreadPoolExecutor(a.jobs) as ex:
        results = dict(ex.map(lambda j: run(a.poet, *j), jobs))
    fu = statistics.mean(100 * statistics.mean(r["test_accuracy"] for r in results[("full", 1.0, s)]["rounds"][1:])
                         for s in seeds)
    print(f"FU's mean test accuracy over rounds 2-10: {fu:.2f}\n")
    print("| method, k = 0.01 | mean over rounds 2-10 of (acc - FU), points (min, max over seeds) |")
    print("|---|---|")
    print(f"| gcpu | {spread(vs_full(results, lambda s: ('gcpu', 0.01, s), seeds))} |")
    for x in shares:
        print(f"| dpu, global share {x} | {spread(vs_full(results, lambda s: ('dpu', 0.01, s, x), seeds))} |")


def svg(results, seeds, path):
    W, H, pad = 300, 220, 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{3 * W + 140}" height="{H + 60}" font-family="sans-serif" font-size="11">']
    lo, hi = 0.70, 0.95
    for p, k in enumerate(KS):
        x0 = p * W + pad
        parts.append(f'<text x="{x0 + 100}" y="14">k = {k}</text>')
        parts.append(f'<rect x="{x0}" y="20" width="{W - pad - 10}" height="{H - 20}" fill="none" stroke="#888"/>')
        for t in (0.75, 0.80, 0.85, 0.90, 0.95):
            y = 20 + (H - 20) * (hi - t) / (hi - lo)
            parts.append(f'<line x1="{x0}" x2="{x0 + W - pad - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
            if p == 0:
                parts.append(f'<text x="{x0 - 30}" y="{y + 4:.1f}">{100 * t:.0f}%</text>')
        for m in METHODS:
            kk = 1.0 if m == "full" else k
            per_round = list(zip(*[[r["test_accuracy"] for r in results[(m, kk, s)]["rounds"]] for s in seeds]))
            def xy(i, a):
                return x0 + 5 + i * (W - pad - 20) / (len(per_round) - 1), 20 + (H - 20) * (hi - a) / (hi - lo)
            band = [xy(i, max(v)) for i, v in enumerate(per_round)] + [xy(i, min(v)) for i, v in reversed(list(enumerate(per_round)))]
            parts.append('<polygon points="%s" fill="%s" opacity="0.12"/>' % (" ".join(f"{a:.1f},{b:.1f}" for a, b in band), COLORS[m]))
            line = [xy(i, statistics.mean(v)) for i, v in enumerate(per_round)]
            parts.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>' % (" ".join(f"{a:.1f},{b:.1f}" for a, b in line), COLORS[m]))
        parts.append(f'<text x="{x0 + 60}" y="{H + 15}">round (200 + 100 per round examples)</text>')
    for i, m in enumerate(METHODS):
        parts.append(f'<line x1="{3 * W + 10}" x2="{3 * W + 30}" y1="{40 + 18 * i}" y2="{40 + 18 * i}" stroke="{COLORS[m]}" stroke-width="2"/>')
        parts.append(f'<text x="{3 * W + 35}" y="{44 + 18 * i}">{m}</text>')
    parts.append(f'<text x="{pad}" y="{H + 45}">test accuracy per round, mean over {len(seeds)} seeds (band: min to max); mlp_digits_wide on the 8x8 digits</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("poet")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--svg")
    ap.add_argument("--always-send", action="store_true")
    ap.add_argument("--optimizer", help="of every phase and method (poet update's default: sgd)")
    ap.add_argument("--lr", type=float, help="(poet update's default for the optimizer)")
    ap.add_argument("--global-shares", help="comma-separated shares of DPU's global contribution, in [0, 1]")
    a = ap.parse_args()
    seeds = list(range(1, a.seeds + 1))
    print(f"seeds {seeds}, epochs {a.epochs}, always_send {a.always_send}, optimizer {a.optimizer or 'default'}, "
          f"lr {a.lr or 'default'}\n")
    if a.global_shares:
        return share_sweep(a, seeds, [float(x) for x in a.global_shares.split(",")])
    jobs = [("full", 1.0, s) for s in seeds] + [(m, k, s) for m in METHODS[1:] for k in KS for s in seeds]
    with ThreadPoolExecutor(a.jobs) as ex:
        results = dict(ex.map(lambda j: run(a.poet, *j, a), jobs))
    model_bytes = results[("full", 1.0, 1)]["model_bytes"]
    print(f"model {model_bytes:.0f} B\n")
    print("| method | k | mean over rounds 2-10 of (acc - FU), points | final test acc | rounds sent | bytes a sent round (% of model) |")
    print("|---|---|---|---|---|---|")
    for m in METHODS:
        for k in ([1.0] if m == "full" else KS):
            diffs, finals, sent, sizes = vs_full(results, lambda s: (m, k, s), seeds), [], [], []
            for s in seeds:
                rr = results[(m, k, s)]["rounds"]
                finals.append(100 * rr[-1]["test_accuracy"])
                sent.append(sum(r["sent"] for r in rr[1:]))
                sizes += [r["patch_bytes"] for r in rr[1:] if r["sent"]]
            size = statistics.median(sizes) if sizes else 0
            print(f"| {m} | {k} | {spread(diffs)} | "
                  f"{statistics.mean(finals):.2f} | {statistics.mean(sent):.1f} of 9 | {size:.0f} ({100 * size / model_bytes:.2f}%) |")
    if a.svg:
        svg(results, seeds, a.svg)


if __name__ == "__main__":
    sys.exit(main())
