#!/usr/bin/python3
"""Training under a schedule, measured: accuracy, host time per epoch beside
keep-all and beside the simulator's prediction, and throughput beside
PyTorch on the same model, batch and one thread.

Runs `poet train` on Fashion-MNIST (Debian's dataset-fashion-mnist; install
with scripts/deps.sh --bench) for resnet_small on the m4 profile:
  - one epoch each at keep-all and at 40% of the keep-all peak (portfolio,
    hybrid), for host time per epoch and its overhead;
  - three epochs at 40% for the test accuracy;
  - 200 steps at keep-all beside 200 PyTorch steps (float32, SGD with
    momentum, torch.set_num_threads(1)) on random data of the same shape.
Prints markdown. Takes about 25 minutes on 2 cores.

usage: bench/train.py [build/poet] > table.md
"""
import json
import subprocess
import sys
import time

import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
from torch_models import MODELS  # noqa: E402

POET = sys.argv[1] if len(sys.argv) > 1 else "build/poet"
MODEL, DEVICE, BATCH = "resnet_small", "m4", 32


def poet(*args):
    out = subprocess.run([POET, *args, "--json", "--quiet"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"poet {' '.join(args)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def train(budget, planner, **kw):
    args = ["train", "--runtime-model", "compute", "--model", MODEL, "--device", DEVICE, "--budget", budget, "--planner", planner]
    for k, v in kw.items():
        args += [f"--{k}", str(v)]
    return poet(*args)


def torch_steps(steps):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = MODELS[MODEL]()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.rand(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))
    for _ in range(10):  # warm-up
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return time.perf_counter() - t0


def main():
    rows = []
    for budget, planner in [("100%", "keep-all"), ("40%", "portfolio"), ("40%", "hybrid")]:
        r = train(budget, planner, epochs=1)
        plan = poet("plan", "--runtime-model", "compute", "--model", MODEL, "--device", DEVICE, "--budget", budget, "--planner", planner)
        rows.append((budget, planner, r, plan))
    base_r, base_plan = rows[0][2], rows[0][3]
    print(f"| {MODEL} on {DEVICE}, 1 epoch | arena (B) | recomputations | paged (MB) | host s/epoch (steps) "
          "| overhead, measured | device time/step, simulated | overhead, simulated | test accuracy |")
    print("|---|---|---|---|---|---|---|---|---|")
    for budget, planner, r, plan in rows:
        meas = r["host_step_seconds"] / base_r["host_step_seconds"]
        sim = plan["time_with_paging_s"] / base_plan["time_with_paging_s"]
        print(f"| {budget} {planner} | {r['arena_peak_bytes']} | {r['recomputations']} | "
              f"{r['paged_bytes'] / 1e6:.0f} | {r['host_step_seconds']:.1f} | {meas:.3f}x | "
              f"{plan['time_with_paging_s']:.2f} s | {sim:.3f}x | {100 * r['test_accuracy']:.2f}% |")
    acc = train("40%", "portfolio", epochs=3)
    print()
    print(f"3 epochs at 40% of the keep-all peak ({acc['budget_bytes']} B of {acc['keep_all_peak_bytes']} B; "
          f"arena {acc['arena_peak_bytes']} B): test accuracy {100 * acc['test_accuracy']:.2f}%, "
          f"final loss {acc['final_loss']:.4f}, weights {acc['weights_sha256'][:16]}, "
          f"host {acc['host_seconds']:.0f} s")
    steps = 200
    p = train("100%", "keep-all", steps=steps)
    t = torch_steps(steps)
    print()
    print(f"| throughput, batch {BATCH}, one thread | steps/s | examples/s |")
    print("|---|---|---|")
    print(f"| poet (keep-all) | {steps / p['host_step_seconds']:.2f} | {steps * BATCH / p['host_step_seconds']:.0f} |")
    print(f"| PyTorch {torch.__version__} | {steps / t:.2f} | {steps * BATCH / t:.0f} |")
    print(f"\npoet / PyTorch time per step: {p['host_step_seconds'] / t:.2f}x")


if __name__ == "__main__":
    main()
