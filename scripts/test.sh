#!/usr/bin/env bash
# Installs missing packages, builds cyan and runs the whole test suite with ctest.
#   scripts/test.sh            the debug preset (also builds the examples and benchmarks)
#   scripts/test.sh asan       AddressSanitizer + UndefinedBehaviorSanitizer, then the fuzz
#                              targets (the fuzz preset: clang, ASan + UBSan) for a bounded time
#                              each (ctest label fuzz; CYAN_FUZZ_SECONDS, default 60)
#   scripts/test.sh tsan       ThreadSanitizer
# The sanitizer lanes skip the packaging tests (see below).
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
# The packaging tests (label packaging) build cyan as a consumer project would, with the
# consumer's own flags and no sanitizer: the same work in every lane, so the sanitizer lanes
# leave them to the debug lane.
skip=()
case "$preset" in asan | tsan) skip=(-LE packaging) ;; esac
ctest --preset "$preset" -j "$jobs" "${skip[@]}" "$@"

# The ASan lane also fuzzes: every parser of hostile input for a bounded time (tests/fuzz).
if [ "$preset" = asan ] && [ $# -eq 0 ]; then
  cmake --preset fuzz -DCYAN_FUZZ_SECONDS="${CYAN_FUZZ_SECONDS:-60}"
  cmake --build --preset fuzz -j "$jobs"
  ctest --preset fuzz -j "$jobs"
fi
