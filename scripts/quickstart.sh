#!/usr/bin/env bash
# Installs what is missing, builds, and runs poet's main job on its defaults:
# plan a training iteration of a CNN for the 8x8 digits (batch 16) on the
# nRF52840 (Cortex-M4F) within its 256 KiB of RAM (what the weights,
# gradients, momentum, batch, workspace and control leave), draw the
# schedule, train the CNN under exactly that schedule on the real data, then
# on the emulated STM32F405.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
build/poet plan --model cnn_digits --device m4 --batch 16 --budget ram --out build/plan.json
build/poet show build/plan.json --svg build/plan.svg
echo "schedule drawn in build/plan.svg"
build/poet train --model cnn_digits --data digits --device m4 --batch 16 --schedule build/plan.json --epochs 10
# The same CNN on the emulated STM32F405 (QEMU's netduinoplus2, 192 KiB of
# RAM), where its ordinary training at batch 8 does not fit: poet fit says
# which batches do, and --budget ram plans the board's RAM less what its
# firmware keeps, so the run fits on the first try.
build/poet fit --model cnn_digits --device stm32f405 --batch 8 --batch 16 --train all
build/poet emulate --model cnn_digits --data digits --batch 8 --budget ram --steps 5
