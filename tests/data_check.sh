#!/bin/sh
# Runs data_check.py (poet on NumPy files against PyTorch) in a scratch folder.
set -e
/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || { echo "data_check: skipped, python3-torch is not installed (scripts/deps.sh --test installs it)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$2" "$1" "$work"
