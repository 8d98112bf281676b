#!/usr/bin/env bash
# Installs missing packages, builds cyan and runs the whole test suite with ctest.
#   scripts/test.sh            the debug preset (also builds the examples and benchmarks)
#   scripts/test.sh asan       AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/test.sh tsan       ThreadSanitizer
# Extra arguments go to ctest (e.g. -R queue, -L stress).
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-debug}"
shift || true
scripts/install-deps.sh

# Sanitizer reports fail the test that produced them.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"

jobs="$(nproc)"
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" -j "$jobs" "$@"
