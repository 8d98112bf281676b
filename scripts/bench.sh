#!/usr/bin/env bash
# Installs missing packages, builds cyan in Release and runs the benchmark suite: every benchmark
# prints its arms' medians and ratios, and the report lands in bench-results/ (summary.md with
# one panel-<family>.png per family; scripts/bench_report.sh --compare OLD NEW compares two runs).
#   CYAN_BENCH_REPS=15 scripts/bench.sh    more repetitions (default 11)
#   CYAN_BENCH_BUSY_ROWS=0 scripts/bench.sh  no busy pass: by default the dispatch, fork-join and
#                                           ping-pong benchmarks (factorial, forkjoin, sync) run
#                                           a second time in busy mode (CYAN_BENCH_BUSY=1: a
#                                           busy-loop process on the last CPU beside every arm
#                                           run, rows "<workload> [busy]"; examples/bench/harness.h)
#   CYAN_BENCH_ARMS=regex scripts/bench.sh  only the arms whose name matches
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh bench
cmake --preset release
cmake --build --preset release -j "$(nproc)"

mkdir -p bench-results
results="$PWD/bench-results/results.csv"
echo "benchmark,workload,arm,median_s,min_s,max_s,reps,checksum" >"$results"
export CYAN_BENCH_CSV="$results"

status=0
for benchmark in build/release/examples/*_benchmark; do
  [ -x "$benchmark" ] || continue
  echo
  echo "=== $(basename "$benchmark") ==="
  env -u CYAN_BENCH_BUSY "$benchmark" || status=1
done

if [ "${CYAN_BENCH_BUSY_ROWS:-1}" != 0 ]; then
  for name in factorial_benchmark forkjoin_benchmark sync_benchmark; do
    benchmark="build/release/examples/$name"
    [ -x "$benchmark" ] || continue  # forkjoin_benchmark: only once it exists
    echo
    echo "=== $name [busy] ==="
    CYAN_BENCH_BUSY=1 "$benchmark" || status=1
  done
fi

echo
echo "=== summary (bench-results/results.csv, summary.txt, summary.md, panel-*.png) ==="
scripts/bench_report.sh "$results"
[ $status -eq 0 ] || echo "cyan bench: some benchmark checks FAILED (see above)"
exit $status
