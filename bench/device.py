#!/usr/bin/python3
"""poet on the emulated Cortex-M4F (QEMU's netduinoplus2, -icount shift=0).

1. The convolution kernels: instructions per multiply-add of poet's kernels
   (chunks of 1 and 16 output positions, and whole images) beside a plain
   reference loop with the same sums (build/firmware/poet-kernel-bench.elf,
   bench/device_kernels.c); both give the same bits. Then ReLU's and clip's
   (ReLU6) instructions per element, forward and backward, the same way.
2. Training steps: `poet emulate` on cnn_digits at batch 8 under several
   budgets: RAM, recomputations, paging, instructions per step, beside the
   m4 profile's predicted compute time for the same step.
Prints markdown. Takes about a minute.

usage: bench/device.py [build/poet] [build/firmware] > table.md
"""
import json
import subprocess
import sys

POET = sys.argv[1] if len(sys.argv) > 1 else "build/poet"
FIRMWARE = sys.argv[2] if len(sys.argv) > 2 else "build/firmware"
CLOCK_HZ = 64e6  # the nRF52840 the m4 profile describes


def kernels():
    out = subprocess.run(["qemu-system-arm", "-M", "netduinoplus2", "-display", "none", "-serial", "null",
                          "-monitor", "none", "-icount", "shift=0", "-semihosting-config", "enable=on,target=native",
                          "-kernel", f"{FIRMWARE}/poet-kernel-bench.elf"], capture_output=True, text=True, timeout=300)
    rows, elems = {}, {}
    for line in (out.stdout + out.stderr).splitlines():
        what, shape, kernel, ipm, bits = line.split()
        (rows if what == "conv" else elems).setdefault(shape, {})[kernel] = (float(ipm), bits)
    print("| conv (batch 8, 3x3, stride 1, pad 1) | poet fwd, chunk 1 / 16 / image | poet bwd, chunk 1 / 16 / image "
          "| reference fwd | reference bwd | same bits |")
    print("|---|---|---|---|---|---|")
    for shape, k in rows.items():
        f = " / ".join(f"{k[f'poet-forward-{c}'][0]:.2f}" for c in ["min", "16", "full"])
        b = " / ".join(f"{k[f'poet-backward-{c}'][0]:.2f}" for c in ["min", "16", "full"])
        same = all(v[1] == "same-bits" for v in k.values())
        print(f"| {shape} | {f} | {b} | {k['reference-forward'][0]:.2f} | {k['reference-backward'][0]:.2f} | "
              f"{'yes' if same else 'NO'} |")
    print("\n(instructions per multiply-add; backward counts the input and weight gradients, two multiply-adds)\n")
    print("| elementwise (4096 elements) | poet fwd | poet bwd | reference fwd | reference bwd | same bits |")
    print("|---|---|---|---|---|---|")
    for op, k in elems.items():
        cell = lambda name: f"{k[name][0]:.2f}" if name in k else "-"
        print(f"| {op} | {cell('poet-forward')} | {cell('poet-backward')} / masked {cell('poet-backward-masked')} | "
              f"{cell('reference-forward')} | {cell('reference-backward')} / masked {cell('reference-backward-masked')} | "
              f"{'yes' if all(v[1] == 'same-bits' for v in k.values()) else 'NO'} |")
    print("\n(instructions per element)")


def emulate(budget, factor, extra=()):
    args = [POET, "emulate", "--runtime-model", "compute", "--model", "cnn_digits", "--data", "digits", "--batch", "8", "--device", "m4", "--budget", budget,
            "--runtime-factor", factor, "--steps", "3", "--seed", "7", "--time-limit", "10", "--test-examples", "0", "--json", *extra]
    out = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if out.returncode:
        return None
    return json.loads(out.stdout)


def steps():
    print("| cnn_digits, batch 8 | RAM (B) of 196608 | arena = planned (B) | recomputations / step | paged / step (B) "
          "| instructions / step | m4 profile: compute s / step | instructions / 64 MHz (s) | profile / emulated "
          "| conv fwd, bwd share | bit-identical |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for budget, factor in [("100%", "1.5"), ("60%", "1.5"), ("50%", "1.0"), ("42%", "1.2"), ("42%", "1.5")]:
        r = emulate(budget, factor, ["--profile"])
        if r is None:
            print(f"| {budget}, factor {factor} | refused: does not fit the board | | | | | | | | | |")
            continue
        n = r["steps"]
        ips = r["instructions_per_step"]
        conv = f"{r['conv_forward_ticks'] / r['kernel_ticks']:.0%}, {r['conv_backward_ticks'] / r['kernel_ticks']:.0%}"
        print(f"| {budget} ({r['budget_bytes']} B), factor {factor} | {r['ram_total_bytes']} | {r['arena_peak_bytes']}"
              f" = {r['planned_arena_bytes']} | {r['recomputations'] / n:.0f} | {r['paged_bytes'] / n:.0f} | "
              f"{ips:.3g} | {r['predicted_compute_s_per_step']:.3f} | {ips / CLOCK_HZ:.3f} | "
              f"{r['predicted_compute_s_per_step'] / (ips / CLOCK_HZ):.2f}x | {conv} | "
              f"{'yes' if r.get('bit_identical') else 'NO'} |")


kernels()
print()
steps()
