#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs them for SECONDS in all
# (default 60): half for fuzz_parsers (libFuzzer's own mutations of every
# input), half for fuzz_fields (device images, checkpoints, binary
# schedules and patches changed one integer field at a time, the CRC made
# right). A finding is saved under tests/fuzz/corpus/ (it then replays in
# every test run).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DPOET_FUZZ=ON -DPOET_WERROR=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_parsers fuzz_fields >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in fuzz_parsers fuzz_fields; do
    mkdir -p "$work/$target"
    cp tests/fuzz/corpus/* "$work/$target/"
    echo "== $target for $((seconds / 2)) s"
    build-fuzz/tests/$target -max_total_time="$((seconds / 2))" -max_len=65536 -timeout=10 -print_final_stats=1 \
        -artifact_prefix=tests/fuzz/corpus/finding- "$work/$target" 2>"$work/$target.log" ||
        { tail -40 "$work/$target.log"; exit 1; }
    grep -E "^stat::number_of_executed_units|^Done" "$work/$target.log" || true
done
