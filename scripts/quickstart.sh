#!/usr/bin/env bash
# Installs what is missing, builds, and runs poet's main job on its defaults:
# plan a training iteration of a CNN for the 8x8 digits on the nRF52840
# (Cortex-M4F) at 45% of the memory ordinary training needs, draw the
# schedule, then train the CNN under that schedule on the real data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
build/poet plan --model cnn_digits --device m4 --budget 45% --out build/plan.json
build/poet show build/plan.json --svg build/plan.svg
echo "schedule drawn in build/plan.svg"
build/poet train --model cnn_digits --data digits --device m4 --budget 45% --epochs 10
