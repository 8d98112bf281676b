#!/usr/bin/env bash
# The benchmark report (scripts/bench_report.py; families, references and goals in
# scripts/bench_goals.csv):
#   scripts/bench_report.sh [--out DIR] [results.csv]
#       the console table (stdout and summary.txt), summary.md and one chart per family,
#       panel-<family>.png, beside the CSV or in DIR (default bench-results/results.csv)
#   scripts/bench_report.sh --compare OLD.csv NEW.csv
#       per workload, each cyan arm's ratio in both runs, its change and whether it stayed
#       inside the spread (exit status 0 whatever moved; 1 if a file cannot be read)
# CYAN_BENCH_DATE and CYAN_BENCH_MACHINE override summary.md's date (default: the CSV's
# modification time) and machine line (default: /proc/cpuinfo, nproc, uname -r).
set -euo pipefail
exec python3 "$(dirname "$0")/bench_report.py" "$@"
