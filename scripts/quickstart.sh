#!/usr/bin/env bash
# Installs what is missing, builds, and runs poet's main job on its defaults:
# plan one training iteration of ResNet-18 (CIFAR-10) on the nRF52840 at half
# of the memory ordinary training needs, then draw the schedule.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
build/poet plan --model resnet18_cifar --device m4 --budget 50% --out build/plan.json
build/poet show build/plan.json --svg build/plan.svg
