#!/usr/bin/env bash
# What a restructuring must leave as it was, one line each: the weights
# `poet train` reaches (SHA-256), the bytes of `poet export` under a saved
# schedule and of `poet encode`, the energies `poet plan --planner milp`
# proves on POET's reference instances, and (with QEMU) the instructions a
# step takes on the emulated Cortex-M4F. Run it before and after and diff:
#   bench/fingerprint.sh build/poet > before.txt   (and after.txt)
# The instruction count may move by a fraction of a percent with code
# layout; every other line must be identical.
set -euo pipefail
poet=${1:-build/poet}
data=$(cd "$(dirname "$0")/../tests/data" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
sha() { sha256sum "$1" | cut -c1-64; }

# training: keep-all, a recomputing and paging schedule, Adam, an imported model
"$poet" plan --runtime-model compute --model cnn_digits --device m4 --batch 8 --budget 42% --runtime-factor 1.2 --planner hybrid --quiet \
    --out "$tmp/plan.json" >/dev/null
for run in "--model cnn_digits --budget 100% --steps 60" \
    "--model cnn_digits --batch 8 --schedule PLAN --steps 60" \
    "--model cnn_digits --budget 60% --planner remat-dtr --steps 30 --optimizer adam" \
    "--model mlp_digits --budget 100% --epochs 1 --train last:2+ratio:0.5" \
    "--onnx DATA/onnx/digits_cnn.onnx --data digits --budget 70% --planner hybrid --steps 20"; do
    args=${run//PLAN/$tmp/plan.json}
    # shellcheck disable=SC2086
    "$poet" train ${args//DATA/$data} --device m4 --json --quiet >"$tmp/train.json" 2>/dev/null
    echo "train $run: weights $(field "$tmp/train.json" weights_sha256)"
done

# the device image under a saved schedule, and the binary schedule
"$poet" export --model cnn_digits --device m4 --batch 8 --schedule "$tmp/plan.json" --out "$tmp/img.bin" >/dev/null 2>&1
echo "export cnn_digits under the hybrid schedule: $(sha "$tmp/img.bin")"
"$poet" encode "$tmp/plan.json" --out "$tmp/plan.bin" >/dev/null
echo "encode the hybrid schedule: $(sha "$tmp/plan.bin")"

# the MILP's proven energies on reference instances
for inst in linear__m4 linear__a72 vgg16_cifar__m4 transformer__m4 bert__a72; do
    for budget in 60% 90%; do
        "$poet" plan --runtime-model compute --instance "$data/reference/$inst.json" --budget "$budget" --planner milp --deterministic \
            --quiet --json --allow-infeasible >"$tmp/plan-$inst.json" || true
        echo "milp $inst at $budget: $(field "$tmp/plan-$inst.json" status) $(field "$tmp/plan-$inst.json" energy_j) J"
    done
done

# the emulated board's instructions per step
if command -v qemu-system-arm >/dev/null; then
    "$poet" emulate --model cnn_digits --data digits --batch 8 --schedule "$tmp/plan.json" --steps 3 --json \
        >"$tmp/em.json" 2>/dev/null
    echo "emulate cnn_digits: weights $(field "$tmp/em.json" weights_sha256), $(field "$tmp/em.json" instructions_per_step) instructions per step"
fi
