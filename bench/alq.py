#!/usr/bin/python3
"""Multi-bit weights on the 8x8 digits (issue 18): accuracy against average
bit width for ALQ, the fixed-bit-width STE baseline and BWN.

usage: bench/alq.py POET_ALQ [--seeds 5] [--epochs 30] [--svg FILE] [--json FILE | --save FILE]

Runs build/poet-alq (bench/alq.c) and prints a Markdown table (mean, min and
max test accuracy over the seeds, the average bit width reached and the
packed bytes of the linear layers with their float biases), the issue's
targets with whether they hold, and how ALQ spread its terms over the
groups."""
import argparse
import report_io

STYLE = {"alq": ("ALQ", "#d62728"), "ste": ("fixed bit width, STE", "#1f77b4"), "bwn": ("BWN (1 bit)", "#2ca02c")}


def svg(r, path):
    """Accuracy against average bit width (log scale), FP32 as a dashed line."""
    W, H, L, T = 420, 260, 60, 30
    lo, hi = 80, 95
    import math
    xs = lambda b: L + 20 + (W - L - 40) * (math.log2(b) + 1) / 2  # 0.5 .. 2 bits
    ys = lambda a: T + H * (hi - a) / (hi - lo)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W + 230}" height="{H + 80}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{L + 10}" y="18">MLP 64-256-256-10, 8x8 digits, {r["seeds"]} seeds, groups of {r["group"]}</text>',
           f'<rect x="{L}" y="{T}" width="{W - L}" height="{H}" fill="none" stroke="#888"/>']
    for t in range(lo, hi + 1, 5):
        out.append(f'<text x="{L - 32}" y="{ys(t) + 4:.1f}">{t}%</text>')
        out.append(f'<line x1="{L}" x2="{W}" y1="{ys(t):.1f}" y2="{ys(t):.1f}" stroke="#eee"/>')
    for b in (0.5, 0.75, 1, 2):
        out.append(f'<text x="{xs(b) - 8:.1f}" y="{T + H + 16}">{b:g}</text>')
    out.append(f'<text x="{L + 110}" y="{T + H + 34}">average bits per linear weight</text>')
    fp = 100 * r["fp32"]["mean"]
    out.append(f'<line x1="{L}" x2="{W}" y1="{ys(fp):.1f}" y2="{ys(fp):.1f}" stroke="#000" stroke-dasharray="4 3"/>')
    for i, (arm, (label, c)) in enumerate(STYLE.items()):
        pts = sorted((a for a in r["arms"] if a["arm"] == arm), key=lambda a: a["bits"])
        if len(pts) > 1:
            d = " ".join(f"{'M' if k == 0 else 'L'}{xs(p['bits']):.1f},{ys(100 * p['mean']):.1f}" for k, p in enumerate(pts))
            out.append(f'<path d="{d}" fill="none" stroke="{c}"/>')
        for p in pts:
            x = xs(p["bits"]) + 4 * (i - 1)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{ys(100 * p["min"]):.1f}" y2="{ys(100 * p["max"]):.1f}" stroke="{c}"/>')
            out.append(f'<circle cx="{x:.1f}" cy="{ys(100 * p["mean"]):.1f}" r="3" fill="{c}"/>')
        out.append(f'<circle cx="{W + 20}" cy="{T + 10 + 16 * i}" r="4" fill="{c}"/>')
        out.append(f'<text x="{W + 30}" y="{T + 14 + 16 * i}">{label}</text>')
    out.append(f'<line x1="{W + 14}" x2="{W + 26}" y1="{T + 58}" y2="{T + 58}" stroke="#000" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{W + 30}" y="{T + 62}">FP32 ({r["fp32"]["bytes"]} B)</text>')
    out.append(f'<text x="{W + 10}" y="{T + 90}">bars: min to max over seeds</text>')
    with open(path, "w") as f:
        f.write("\n".join(out + ["</svg>"]) + "\n")


def table(r):
    fp = r["fp32"]
    print(f"{r['seeds']} seeds from {r['first_seed']}, {r['epochs']} epochs for the float model and again for each "
          f"quantized one (and the float reference), groups of {r['group']} weights, {r['train']} training and "
          f"{r['test']} test examples\n")
    print("| method | target bits | bits reached | bytes (linear layers) | test accuracy (%) |")
    print("|---|---|---|---|---|")
    print(f"| FP32 | 32 | 32 | {fp['bytes']} | {100 * fp['mean']:.2f} |")
    cell = lambda a: f"{100 * a['mean']:.2f} ({100 * a['min']:.2f}-{100 * a['max']:.2f})"
    for a in r["arms"]:
        print(f"| {STYLE[a['arm']][0]} | {a['target_bits']:g} | {a['bits']:.3f} | {a['bytes']:.0f} | {cell(a)} |")
    alq = {a["target_bits"]: a for a in r["arms"] if a["arm"] == "alq"}
    ste = {a["target_bits"]: a for a in r["arms"] if a["arm"] == "ste"}
    low = [b for b in (1, 0.75, 0.5) if b in alq and b in ste]
    within = [b for b in low if 100 * (fp["mean"] - alq[b]["mean"]) <= 1.5]
    beats = [b for b in low if alq[b]["mean"] >= ste[b]["mean"]]
    print()
    print(f"- ALQ at <= 1 bit within 1.5 points of FP32: {'yes' if len(within) == len(low) else 'NO'} at "
          + ", ".join(f"{b:g} bit ({100 * (alq[b]['mean'] - fp['mean']):+.2f})" for b in low))
    print(f"- ALQ at least the fixed-bit baseline at 2 of the 3 points at or below 1 bit: "
          f"{'yes' if len(beats) >= 2 else 'NO'} (" + ", ".join(
              f"{b:g} bit: {100 * (alq[b]['mean'] - ste[b]['mean']):+.2f}" for b in low) + " points)")
    for b in sorted(alq, reverse=True):
        h = alq[b]["groups_with_terms_seed0"]
        print(f"- ALQ at {b:g} bit, groups with 0..6 terms (seed {r['first_seed']}): {h}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("alq")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=30)
    report_io.add_options(ap)
    a = ap.parse_args()
    report = report_io.run_or_load(a, [a.alq, a.seeds, a.epochs])
    table(report)
    if a.svg:
        svg(report, a.svg)


if __name__ == "__main__":
    main()
