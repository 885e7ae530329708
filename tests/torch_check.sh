#!/bin/sh
# Runs torch_dump and checks its figures with PyTorch.
set -e
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "torch_check: skipped, python3-torch is not installed (scripts/deps.sh --test installs it)"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" > "$out"
/usr/bin/python3 "$2" "$out"
