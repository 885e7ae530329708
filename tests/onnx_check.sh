#!/bin/sh
# Runs tests/onnx_check.py, then tests/onnx_zoo_check.py, in a temporary directory.
set -e
/usr/bin/python3 -c 'import torch, onnx' 2>/dev/null || { echo "onnx_check: skipped, python3-torch or python3-onnx is not installed (scripts/deps.sh --test installs them)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$2" "$1" "$dir"
if /usr/bin/python3 -c 'import torchvision' 2>/dev/null; then
    /usr/bin/python3 "$(dirname "$2")/onnx_zoo_check.py" "$3" "$dir"
else
    echo "onnx_check: torchvision's resnet18 skipped, python3-torchvision is not installed"
fi
