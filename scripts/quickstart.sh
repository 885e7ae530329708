#!/usr/bin/env bash
# Installs what is missing, builds, and runs poet's main job on its defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
build/poet graph --model resnet18_cifar --device m4
