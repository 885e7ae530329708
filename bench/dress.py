#!/usr/bin/python3
"""DRESS-style nested sparse subnets on the 8x8 digits (issue 18): the
accuracy-per-level figure and table.

usage: bench/dress.py POET_DRESS [--seeds 5] [--epochs 30] [--svg FILE] [--json FILE | --save FILE]

Runs build/poet-dress (bench/dress.c): the MLP 64-256-256-10 trained dense,
then at the sparsity levels 0/50/75/90% one-shot magnitude pruning, one
pruned and fine-tuned model per level, and DRESS-style joint training of one
backbone, every model under a POET schedule. Prints a Markdown table (mean,
min and max over the seeds), the issue's targets with whether they hold, the
level-switch and separate-model-load times and the storage."""
import argparse
import report_io

ARMS = [("one-shot", "one-shot pruning of the dense model", "#7f7f7f"),
        ("per-level", "pruned and fine-tuned per level", "#1f77b4"),
        ("dress", "DRESS-style, one backbone", "#d62728")]


def svg(r, path):
    """Test accuracy against sparsity: mean over seeds, bars from min to max."""
    W, H, L, T = 420, 260, 60, 30
    lo, hi = 50, 100
    levels = r["levels"]
    xs = lambda k: L + 30 + k * (W - L - 60) / (len(levels) - 1)
    ys = lambda a: T + H * (hi - a) / (hi - lo)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W + 250}" height="{H + 80}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{L + 20}" y="18">MLP 64-256-256-10, 8x8 digits, {r["seeds"]} seeds, {r["epochs"]} epochs each</text>',
           f'<rect x="{L}" y="{T}" width="{W - L}" height="{H}" fill="none" stroke="#888"/>']
    for t in range(lo, hi + 1, 10):
        out.append(f'<text x="{L - 32}" y="{ys(t) + 4:.1f}">{t}%</text>')
        out.append(f'<line x1="{L}" x2="{W}" y1="{ys(t):.1f}" y2="{ys(t):.1f}" stroke="#eee"/>')
    for k, s in enumerate(levels):
        out.append(f'<text x="{xs(k) - 10:.1f}" y="{T + H + 16}">{s}%</text>')
    out.append(f'<text x="{L + 120}" y="{T + H + 34}">sparsity of every linear layer</text>')
    dense = 100 * r["accuracy"]["dense"]
    out.append(f'<line x1="{L}" x2="{W}" y1="{ys(dense):.1f}" y2="{ys(dense):.1f}" stroke="#000" stroke-dasharray="4 3"/>')
    for i, (key, label, c) in enumerate(ARMS):
        pts = r["accuracy"][key]
        d = " ".join(f"{'M' if k == 0 else 'L'}{xs(k):.1f},{ys(100 * p['mean']):.1f}" for k, p in enumerate(pts))
        out.append(f'<path d="{d}" fill="none" stroke="{c}"/>')
        for k, p in enumerate(pts):
            x = xs(k) + 4 * (i - 1)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{ys(100 * p["min"]):.1f}" y2="{ys(100 * p["max"]):.1f}" stroke="{c}"/>')
            out.append(f'<circle cx="{x:.1f}" cy="{ys(100 * p["mean"]):.1f}" r="3" fill="{c}"/>')
        out.append(f'<circle cx="{W + 20}" cy="{T + 10 + 16 * i}" r="4" fill="{c}"/>')
        out.append(f'<text x="{W + 30}" y="{T + 14 + 16 * i}">{label}</text>')
    out.append(f'<line x1="{W + 14}" x2="{W + 26}" y1="{T + 58}" y2="{T + 58}" stroke="#000" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{W + 30}" y="{T + 62}">dense model</text>')
    out.append(f'<text x="{W + 10}" y="{T + 90}">bars: min to max over seeds</text>')
    with open(path, "w") as f:
        f.write("\n".join(out + ["</svg>"]) + "\n")


def table(r):
    acc = r["accuracy"]
    print(f"{r['seeds']} seeds from {r['first_seed']}, {r['epochs']} epochs for the dense model and again for each "
          f"arm, {r['train']} training and {r['test']} test examples; dense model {100 * acc['dense']:.2f}%\n")
    print("| sparsity | " + " | ".join(label for _, label, _ in ARMS) + " | DRESS-style through the packed rows |")
    print("|---|---|---|---|---|")
    cell = lambda p: f"{100 * p['mean']:.2f} ({100 * p['min']:.2f}-{100 * p['max']:.2f})"
    for k, s in enumerate(r["levels"]):
        print(f"| {s}% | " + " | ".join(cell(acc[key][k]) for key, _, _ in ARMS) + f" | {cell(acc['dress-packed'][k])} |")
    d, per, one = acc["dress"], acc["per-level"], acc["one-shot"]
    gaps = [100 * (per[k]["mean"] - d[k]["mean"]) for k in range(len(d))]
    above = 100 * (d[-1]["mean"] - one[-1]["mean"])
    ratio = r["load_separate_s"] / r["switch_s"] if r["switch_s"] > 0 else float("inf")
    indices = 2 * r["sparse_weights"]
    print()
    print(f"- DRESS-style within 1.0 point of the per-level models at every level: "
          f"{'yes' if max(gaps) <= 1.0 else 'NO'} (per-level - DRESS-style: "
          + ", ".join(f"{g:+.2f}" for g in gaps) + " points)")
    print(f"- at least 3 points above one-shot pruning at {r['levels'][-1]}%: {'yes' if above >= 3 else 'NO'} "
          f"({above:+.2f} points)")
    print(f"- median level switch (all three layers) {1e6 * r['switch_s']:.3f} us, under 5 us: "
          f"{'yes' if r['switch_s'] < 5e-6 else 'NO'}; median load of a separate model of one level (its packed rows "
          f"read from a file in the page cache) {1e6 * r['load_separate_s']:.2f} us, {ratio:.0f}x the switch "
          f"(at least 10x: {'yes' if ratio >= 10 else 'NO'})")
    print(f"- storage: {r['packed_bytes']} B packed = {r['dense_bytes']} B dense + {indices} B of 16-bit columns "
          f"(at most one dense copy plus 16-bit indices: "
          f"{'yes' if r['packed_bytes'] <= r['dense_bytes'] + indices else 'NO'}); four separate models of the "
          f"levels, packed: {r['separate_models_bytes']} B")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dress")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=30)
    report_io.add_options(ap)
    a = ap.parse_args()
    report = report_io.run_or_load(a, [a.dress, a.seeds, a.epochs])
    table(report)
    if a.svg:
        svg(report, a.svg)


if __name__ == "__main__":
    main()
