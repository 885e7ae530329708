#!/bin/sh
# Runs tests/onnx_check.py in a temporary directory.
set -e
/usr/bin/python3 -c 'import torch, onnx' 2>/dev/null || { echo "onnx_check: skipped, python3-torch or python3-onnx is not installed (scripts/deps.sh --test installs them)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$2" "$1" "$dir"
