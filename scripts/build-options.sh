#!/usr/bin/env bash
# Builds poet with CBC, GLPK and protobuf-c off (the options of
# CMakeLists.txt, on by default) and checks what the stand-ins promise: the
# fast planner still plans and validates (fate search and baselines), the
# milp planner and ONNX in and out are refused with one line that says why,
# and training a zoo model still runs. Usage: scripts/build-options.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-options}
cmake -S . -B "$dir" -DPOET_WITH_CBC=OFF -DPOET_WITH_GLPK=OFF -DPOET_WITH_ONNX=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target poet-cli >/dev/null
poet=$dir/poet
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # NAME EXPECTED-RC PATTERN COMMAND...
    local name=$1 want=$2 pattern=$3 rc=0
    shift 3
    "$@" >"$tmp/out" 2>&1 || rc=$?
    if [ "$rc" != "$want" ] || ! grep -q -- "$pattern" "$tmp/out"; then
        echo "FAIL: $name (exit $rc, wanted $want and '$pattern'):"
        head -5 "$tmp/out"
        fails=$((fails + 1))
    else
        echo "ok: $name"
    fi
}
check "fast plans without the solvers" 0 "validated" \
    "$poet" plan --model cnn_digits --device m4 --budget 50% --time-limit 5 --quiet
check "fast says which bound is missing" 0 "no LP bound: poet was built without CBC" \
    "$poet" plan --model cnn_digits --device m4 --budget 50% --time-limit 5 --quiet
check "milp is refused" 1 "built without it (POET_WITH_CBC=OFF)" \
    "$poet" plan --model cnn_digits --device m4 --budget 50% --planner milp
check "ONNX in is refused" 1 "built without ONNX support" "$poet" import tests/data/onnx/digits_cnn.onnx
check "a zoo model trains" 0 "weights sha256" \
    "$poet" train --model mlp_digits --device m4 --budget 100% --steps 20 --quiet
[ "$fails" = 0 ] || { echo "build options: $fails failed"; exit 1; }
echo "build options: all passed"
