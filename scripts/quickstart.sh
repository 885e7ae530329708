#!/usr/bin/env bash
# Installs what is missing, builds, and runs poet's main job on its defaults:
# plan a training iteration of a CNN for the 8x8 digits (batch 16) on the
# nRF52840 (Cortex-M4F) within its 256 KiB of RAM (what the weights,
# gradients, momentum and batch leave: 72% of what ordinary training needs),
# draw the schedule, then train the CNN under exactly that schedule on the
# real data, and on an emulated microcontroller where the tools are installed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
build/poet plan --model cnn_digits --device m4 --batch 16 --budget ram --out build/plan.json
build/poet show build/plan.json --svg build/plan.svg
echo "schedule drawn in build/plan.svg"
build/poet train --model cnn_digits --data digits --device m4 --batch 16 --schedule build/plan.json --epochs 10
# The same CNN on an emulated Cortex-M4F with 192 KiB of RAM, where its
# ordinary training at batch 8 does not fit, when QEMU and the firmware are
# there (scripts/deps.sh --test installs them).
if command -v qemu-system-arm >/dev/null && [ -f build/firmware/poet-firmware.elf ]; then
    build/poet emulate --model cnn_digits --data digits --batch 8 --budget 42% --runtime-factor 1.2 --steps 5
else
    echo "(skipping the device run: install qemu-system-arm and gcc-arm-none-eabi, then scripts/build.sh)"
fi
