#!/usr/bin/env bash
# Installs, from Debian's archive, whatever poet needs and this machine lacks:
# python3-sklearn ships the 8x8 digits the main job trains on, the Arm
# cross-compiler and QEMU run its device half, librsvg2-bin draws `show --png`
# and dataset-fashion-mnist feeds the README's resnet_small examples. With
# --test, also what the test suite needs (clang and its fuzzing runtime,
# PyTorch and ONNX for the differential tests); with --bench, what bench/
# needs (PuLP for POET's own formulation, PyTorch).
set -euo pipefail
device=(gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)
packages=(gcc libc6-dev make cmake pkg-config libcjson-dev zlib1g-dev coinor-libcbc-dev libglpk-dev libltdl-dev
    liblapack-dev libblas-dev libgfortran-12-dev python3-sklearn libprotobuf-c-dev protobuf-c-compiler libonnx-dev
    librsvg2-bin dataset-fashion-mnist "${device[@]}")
case "${1:-}" in
--test) packages+=(clang libclang-rt-14-dev python3-torch python3-torchvision python3-onnx) ;;
--bench) packages+=(python3-pulp python3-torch) ;;
esac
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "poet: installing ${missing[*]}" >&2
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
