#!/usr/bin/env bash
# Runs the benchmark suite of two Release builds interleaved, benchmark by benchmark, so that
# both see the same phases of a shared host; then compares them (bench_report.sh --compare).
# The order alternates (A B, B A, A B, ...) so that neither build always runs first.
#   scripts/bench_ab.sh OLD_BUILD_DIR NEW_BUILD_DIR [OUT_DIR]
# e.g. a worktree of the old commit built with `cmake --preset release` in both:
#   scripts/bench_ab.sh ../old/build/release build/release bench-results/ab
# Writes OUT_DIR/old/results.csv and OUT_DIR/new/results.csv, each with its report
# (summary.txt, summary.md, panels), and OUT_DIR/compare.txt. CYAN_BENCH_REPS applies to both.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 2 ]; then
  echo "usage: scripts/bench_ab.sh OLD_BUILD_DIR NEW_BUILD_DIR [OUT_DIR]" >&2
  exit 2
fi
old_build="$(cd "$1" && pwd)"
new_build="$(cd "$2" && pwd)"
out="${3:-bench-results/ab}"
mkdir -p "$out/old" "$out/new"
out="$(cd "$out" && pwd)"

header="benchmark,workload,arm,median_s,min_s,max_s,reps,checksum"
echo "$header" >"$out/old/results.csv"
echo "$header" >"$out/new/results.csv"

# One run of benchmark $2 from build $1 ("old" or "new"), its rows into that side's CSV.
run_one() {
  local side="$1" name="$2" build
  [ "$side" = old ] && build="$old_build" || build="$new_build"
  if [ ! -x "$build/examples/$name" ]; then
    echo "=== $name ($side): not built in $build, skipped"
    return 0
  fi
  echo
  echo "=== $name ($side: $build) ==="
  CYAN_BENCH_CSV="$out/$side/results.csv" "$build/examples/$name" || status=1
}

status=0
turn=0
for benchmark in "$new_build"/examples/*_benchmark; do
  [ -x "$benchmark" ] || continue
  name="$(basename "$benchmark")"
  if [ $((turn % 2)) -eq 0 ]; then
    run_one old "$name"
    run_one new "$name"
  else
    run_one new "$name"
    run_one old "$name"
  fi
  turn=$((turn + 1))
done

echo
echo "=== old ==="
scripts/bench_report.sh --out "$out/old" "$out/old/results.csv" >/dev/null
echo "=== new ==="
scripts/bench_report.sh --out "$out/new" "$out/new/results.csv"
echo
echo "=== compare (old -> new) ==="
scripts/bench_report.sh --compare "$out/old/results.csv" "$out/new/results.csv" |
  tee "$out/compare.txt"
[ $status -eq 0 ] || echo "cyan bench_ab: some benchmark checks FAILED (see above)"
exit $status
