#!/usr/bin/python3
"""Few-shot adaptation on the 8x8 digits under partial training (issue 16):
the memory-accuracy figure and table.

usage: bench/fewshot.py POET_FEWSHOT [--tasks 500] [--seed 2026] [--episodes 3000]
                        [--sparsity 0.5] [--budget 0.4] [--ceiling] [--data digits|fashion-mnist]
                        [--svg FILE] [--json FILE | --save FILE]

Runs build/poet-fewshot (bench/fewshot.c): pre-training on classes 0-5,
p-Meta-style meta-training, then 4-way 1-shot and 5-shot tasks from the
unseen classes 6-9 for five arms, each trained under a POET schedule for its
own training graph. Prints a Markdown table: accuracy (mean and 95% interval
over the tasks), the keep-all peak of the arm's training graph, the arena the
planner placed at the smallest feasible budget on the m4 profile, and the
arena high-water mark measured while the arm adapted; and the ratios the
issue's targets name. --ceiling adds, per arm, the best accuracy on the test
classes over a grid of rate multipliers (the classifier's and the rest's)
chosen on those classes: an oracle that bounds what any choice of rates
could give, never used to choose."""
import argparse
import math
import report_io

COLORS = ["#000000", "#1f77b4", "#2ca02c", "#9467bd", "#d62728"]


def svg(report, path):
    """Accuracy (5-shot and 1-shot panels) against memory: the keep-all peak
    (open marker) and the planned POET arena (filled), each arm one colour."""
    W, H, L, T = 360, 260, 60, 30
    arms, data = report["arms"], report.get("data", "digits")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W + 220}" height="{H + 70}" '
           'font-family="sans-serif" font-size="11">']
    for panel, shot in enumerate(["5shot", "1shot"]):
        # the accuracy axis: whole 5-point steps around every arm's interval
        lo = 5 * math.floor(min(a["acc_" + shot] - a["ci_" + shot] for a in arms) / 5)
        hi = 5 * math.ceil(max(a["acc_" + shot] + a["ci_" + shot] for a in arms) / 5)
        x0 = panel * W + L
        xmax = max(a["keep_all_" + shot] for a in arms) * 1.1 / 1024
        xs = lambda b: x0 + (W - L - 20) * (b / 1024) / xmax
        ys = lambda acc: T + H * (hi - acc) / (hi - lo)
        out.append(f'<text x="{x0 + 80}" y="18">4-way {shot[0]}-shot, {data} 6-9</text>')
        out.append(f'<rect x="{x0}" y="{T}" width="{W - L - 20}" height="{H}" fill="none" stroke="#888"/>')
        for t in range(lo, hi + 1, 5):
            out.append(f'<text x="{x0 - 28}" y="{ys(t) + 4:.1f}">{t}%</text>')
            out.append(f'<line x1="{x0}" x2="{x0 + W - L - 20}" y1="{ys(t):.1f}" y2="{ys(t):.1f}" stroke="#eee"/>')
        step = next(k for k in (10, 50, 100, 500, 1000, 5000) if xmax / k <= 8)
        for kib in range(0, int(xmax) + 1, step):
            out.append(f'<text x="{xs(kib * 1024) - 8:.1f}" y="{T + H + 14}">{kib}</text>')
        out.append(f'<text x="{x0 + 60}" y="{T + H + 30}">peak activation memory (KiB), batch {4 * (5 if shot == "5shot" else 1)}</text>')
        for i, a in enumerate(arms):
            acc, ci, c = a["acc_" + shot], a["ci_" + shot], COLORS[i]
            for key, fill in (("keep_all_" + shot, "none"), ("planned_" + shot, c)):
                x, y = xs(a[key]), ys(acc)
                out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{ys(acc - ci):.1f}" y2="{ys(acc + ci):.1f}" stroke="{c}"/>')
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}" stroke="{c}"/>')
    for i, a in enumerate(arms):
        y = T + 10 + 16 * i
        out.append(f'<circle cx="{2 * W + 20}" cy="{y}" r="4" fill="{COLORS[i]}" stroke="{COLORS[i]}"/>')
        out.append(f'<text x="{2 * W + 30}" y="{y + 4}">{a["arm"]}</text>')
    notes = ["open: keep-all peak", "filled: POET schedule, m4,", "smallest feasible budget", "bars: 95% interval"]
    out += [f'<text x="{2 * W + 10}" y="{T + 110 + 16 * i}">{n}</text>' for i, n in enumerate(notes)]
    with open(path, "w") as f:
        f.write("\n".join(out + ["</svg>"]) + "\n")


def table(r):
    print(f"{r.get('data', 'digits')} ({r.get('model', 'cnn_digits')}), seed {r['seed']}, {r['tasks']} test tasks per setting, {r['episodes']} meta-training episodes, "
          f"sparsity {r['sparsity']}, memory budget {r.get('budget', 1)} of full adaptation's keep-all peak\n")
    print("| arm | rate x | 1-shot accuracy (%) | 5-shot accuracy (%) | keep-all peak (B) | POET arena (B) "
          "| high-water (B) | persistent (B) | energy of a step under POET (mJ) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for a in r["arms"]:
        print(f"| {a['arm']} | {a.get('rate_scale', 1):g} | {a['acc_1shot']:.2f} ± {a['ci_1shot']:.2f} | {a['acc_5shot']:.2f} ± {a['ci_5shot']:.2f} "
              f"| {a['keep_all_5shot']} / {a['keep_all_1shot']} | {a['planned_5shot']} / {a['planned_1shot']} "
              f"| {a['high_water_5shot']} / {a['high_water_1shot']} | {a['persistent_5shot']} / {a['persistent_1shot']} "
              f"| {1e3 * a['energy_j_5shot']:.3f} / {1e3 * a['energy_j_1shot']:.3f} |")
    print("\nMemory and energy columns: 5-shot / 1-shot (support batches of 20 and 4). Rate x: the multiplier of "
          "the arm's inner rates (0.1 each for the baselines, the learned ones for p-Meta-style): the smallest "
          "within one standard error of the best on 5-shot tasks of the meta-training classes 0-5, drawn from "
          "examples held out of all training.")
    full, last, pm = r["arms"][0], r["arms"][1], r["arms"][4]
    print()
    for s in ("5shot", "1shot"):
        print(f"- {s[0]}-shot: p-Meta-style memory / full adaptation's: keep-all "
              f"{pm['keep_all_' + s] / full['keep_all_' + s]:.2f}x, POET arena "
              f"{pm['planned_' + s] / full['planned_' + s]:.2f}x, persistent "
              f"{pm['persistent_' + s] / full['persistent_' + s]:.2f}x, energy {pm['energy_j_' + s] / full['energy_j_' + s]:.2f}x; "
              f"accuracy - full "
              f"{pm['acc_' + s] - full['acc_' + s]:+.2f}, - classifier only {pm['acc_' + s] - last['acc_' + s]:+.2f} points")
    same = all(a[f"planned_{s}"] == a[f"high_water_{s}"] for a in r["arms"] for s in ("1shot", "5shot"))
    print(f"- measured high-water mark = planned arena in every arm and setting: {'yes' if same else 'NO'}")
    print("- the selection's 5-shot accuracy on held-out examples of 0-5, over the four multipliers: " + ", ".join(
        f"{x['arm']} {x['selection_5shot_lo']:.2f}-{x['selection_5shot_hi']:.2f}%" for x in r["arms"]
        if "selection_5shot_lo" in x))
    if "ceiling_5shot" in r["arms"][0]:
        print("- ceiling (oracle: multipliers chosen on other tasks of 6-9): " + "; ".join(
            f"{x['arm']} 5-shot {x['ceiling_5shot'][0]:.2f} (classifier x{x['ceiling_5shot'][1]:g}, "
            f"rest x{x['ceiling_5shot'][2]:g}), 1-shot {x['ceiling_1shot'][0]:.2f} "
            f"(x{x['ceiling_1shot'][1]:g}, x{x['ceiling_1shot'][2]:g})" for x in r["arms"]))
    print("- learned inner rates (0: frozen): " + ", ".join(
        f"{x['node']}.{x['tensor']} {x['rate']:.3f}" for x in r["rates"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fewshot")
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--episodes", type=int, default=3000)
    ap.add_argument("--sparsity", type=float, default=0.5)
    ap.add_argument("--budget", type=float, default=0.4, help="of full adaptation's keep-all peak, for the p-Meta-style arm")
    ap.add_argument("--ceiling", action="store_true", help="also the oracle ceiling of each arm (about twice the time)")
    ap.add_argument("--data", default="digits", choices=["digits", "fashion-mnist"],
                    help="fashion-mnist: cnn_fashion on Fashion-MNIST, test classes 6-9")
    report_io.add_options(ap)
    a = ap.parse_args()
    report = report_io.run_or_load(a, [a.fewshot, a.tasks, a.seed, a.episodes, a.sparsity, a.budget] + (["ceiling"] if a.ceiling else []) + (
        [a.data] if a.data != "digits" else []))
    table(report)
    if a.svg:
        svg(report, a.svg)


if __name__ == "__main__":
    main()
