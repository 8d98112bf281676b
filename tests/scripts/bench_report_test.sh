#!/usr/bin/env bash
# scripts/bench_report.sh on recorded rows (tests/scripts/data/):
#   1. the report of results.csv: the console table (summary.txt) and summary.md's table rows
#      are the expected ones (expected_summary.txt, expected_summary_rows.md), its header has
#      the date and machine given, and each family has its panel: a PNG that gnuplot drew
#      without a warning, no wider than a laptop screen shows at 100%;
#   2. --compare old.csv new.csv prints expected_compare.txt and exits 0; an unreadable file
#      exits 1.
# Needs python3 and gnuplot (scripts/install-deps.sh); no C++ build.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
report="$here/../../scripts/bench_report.sh"
data="$here/data"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

expect_same() {  # expected actual what
  if ! diff -u "$1" "$2"; then
    fail "$3 differs from $(basename "$1") (diff above: - expected, + actual)"
  fi
}

for tool in python3 gnuplot; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (scripts/install-deps.sh)"; exit 1; }
done

# 1. The report of one run.
cp "$data/results.csv" "$work/"
CYAN_BENCH_DATE="2026-12-05 10:11 UTC" CYAN_BENCH_MACHINE="test machine, 2 cores" \
  "$report" "$work/results.csv" >"$work/console.txt" 2>"$work/stderr.txt" ||
  fail "bench_report.sh exited $?"
[ ! -s "$work/stderr.txt" ] || fail "bench_report.sh wrote to stderr: $(cat "$work/stderr.txt")"

expect_same "$data/expected_summary.txt" "$work/summary.txt" "summary.txt"
grep '^|' "$work/summary.md" >"$work/rows.md" || true
expect_same "$data/expected_summary_rows.md" "$work/rows.md" "summary.md's table rows"
grep -qx '# cyan benchmarks, 2026-12-05 10:11 UTC' "$work/summary.md" || fail "summary.md: no date line"
grep -q '^Machine: test machine, 2 cores\. ' "$work/summary.md" || fail "summary.md: no machine line"

for family in dispatch timers lock-free-queues echo widget; do
  png="$work/panel-$family.png"
  grep -qF "](panel-$family.png)" "$work/summary.md" || fail "summary.md does not embed $png"
  if [ ! -s "$png" ]; then
    fail "no panel $png"
    continue
  fi
  python3 - "$png" <<'PYTHON' || fail "$png is not a PNG of at most 1400 px wide"
import struct, sys
header = open(sys.argv[1], "rb").read(24)
width, height = struct.unpack(">II", header[16:24])
print("%s: %d x %d" % (sys.argv[1].rsplit("/", 1)[1], width, height))
sys.exit(0 if header[:8] == b"\x89PNG\r\n\x1a\n" and 0 < width <= 1400 and height > 0 else 1)
PYTHON
done
panels=$(find "$work" -name 'panel-*.png' | wc -l)
[ "$panels" -eq 5 ] || fail "$panels panels, expected 5 (one per family)"

# 2. Comparing two runs.
status=0
(cd "$data" && "$report" --compare old.csv new.csv) >"$work/compare.txt" 2>&1 || status=$?
[ "$status" -eq 0 ] || fail "--compare exited $status"
expect_same "$data/expected_compare.txt" "$work/compare.txt" "--compare's output"
status=0
"$report" --compare "$data/old.csv" "$work/missing.csv" >/dev/null 2>&1 || status=$?
[ "$status" -eq 1 ] || fail "--compare with a missing file exited $status, expected 1"

if [ "$failures" -gt 0 ]; then
  echo "bench_report_test: $failures check(s) failed"
  exit 1
fi
echo "bench_report_test: all checks passed"
