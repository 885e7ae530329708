#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: once as
# built for use, once under AddressSanitizer and UndefinedBehaviorSanitizer
# (any report fails the run), then each fuzz target for a bounded time, and
# last a build without the optional CBC, GLPK and protobuf-c.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
export POET_REQUIRE_DEVICE=1 # deps.sh installed QEMU and the Arm compiler: the device test must run
scripts/build.sh
ctest --test-dir "${POET_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
echo "== the suite again under AddressSanitizer and UndefinedBehaviorSanitizer"
POET_BUILD_DIR=build-asan scripts/build.sh -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DPOET_SANITIZE=ON
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
echo "== fuzzing every parser for ${POET_FUZZ_SECONDS:-60} s"
scripts/fuzz.sh "${POET_FUZZ_SECONDS:-60}"
echo "== built without CBC, GLPK and protobuf-c"
scripts/build-options.sh
# set -e stopped at any failure above, so reaching here means all four passed
echo "stages: 4 passed, 0 failed"
