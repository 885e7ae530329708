#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60).
# A finding is saved under tests/fuzz/corpus/ (it then replays in every test run).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DPOET_FUZZ=ON -DPOET_WERROR=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_parsers >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/* "$work/"
build-fuzz/tests/fuzz_parsers -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 \
    -artifact_prefix=tests/fuzz/corpus/finding- "$work" 2>"$work.log" || { tail -40 "$work.log"; exit 1; }
grep -E "^stat::number_of_executed_units|^Done" "$work.log" || true
rm -f "$work.log"
