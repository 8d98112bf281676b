#!/usr/bin/env bash
# Turns bench-results/results.csv into the summary table (stdout), bench-results/summary.txt
# and the chart bench-results/results.png (gnuplot).
#   scripts/bench_report.sh [results.csv]
set -euo pipefail
cd "$(dirname "$0")/.."

csv="${1:-bench-results/results.csv}"
out_dir="$(dirname "$csv")"

# Summary: per benchmark/workload, every arm's median, its spread (max/min of its repetitions;
# "!" marks one above 2, which is not a result yet) and its ratio to the best peer (the fastest
# arm whose name does not start with "cyan"); for cyan arms, >1 means cyan is faster.
awk -F, '
  NR == 1 { next }
  {
    key = $1 "/" $2; n[key]++; arm[key, n[key]] = $3; median[key, n[key]] = $4
    spread[key, n[key]] = ($5 > 0) ? $6 / $5 : 0
    # The first arm of a workload is the cyan reference arm (the harness rule); serial floors are no peer.
    first = !(key in seen)
    if (first) { seen[key] = 1; order[++keys] = key }
    if (!first && $3 !~ /^cyan/ && $3 !~ /serial/ && (!(key in best) || $4 < best[key])) { best[key] = $4; best_arm[key] = $3 }
  }
  END {
    printf "%-44s %-40s %12s %8s %14s\n", "benchmark/workload", "arm", "median (s)", "spread", "speed-up vs best peer"
    for (k = 1; k <= keys; k++) {
      key = order[k]
      for (i = 1; i <= n[key]; i++) {
        ratio = (key in best && median[key, i] > 0) ? sprintf("%.2fx", best[key] / median[key, i]) : "-"
        mark = spread[key, i] > 2 ? "!" : " "
        printf "%-44s %-40s %12.4f %7.2f%s %14s\n", (i == 1 ? key : ""), arm[key, i], median[key, i], spread[key, i], mark, ratio
      }
      if (key in best) printf "%-44s %-40s\n", "", "(best peer: " best_arm[key] ")"
    }
  }' "$csv" | tee "$out_dir/summary.txt"

# Chart: every arm's median relative to the first (cyan) arm of its workload, log scale.
awk -F, 'NR == 1 { next }
  { key = $1 "/" $2; if (!(key in first)) first[key] = $4
    label = $2 ": " $3
    cyan = ($3 ~ /^cyan/ || $4 / first[key] == 1 && !(key in shown)); shown[key] = 1
    printf "\"%s\" %.6f %d\n", label, $4 / first[key], cyan ? 1 : 2 }' "$csv" \
  >"$out_dir/chart.dat"
rows=$(wc -l <"$out_dir/chart.dat")
gnuplot <<GNUPLOT
set terminal pngcairo noenhanced size $((700 + rows * 22)),760 font "DejaVu Sans,9"
set output "$out_dir/results.png"
set title "cyan (teal) vs peers (grey): median time / cyan reference arm, log scale, lower is faster"
set logscale y
set ylabel "time / cyan"
set style fill solid 0.8 border -1
set boxwidth 0.7
set xtics rotate by -60 nomirror
set grid ytics
set key off
set rmargin 12
plot "$out_dir/chart.dat" using 0:2:(\$3 == 1 ? 0x0097A7 : 0x9E9E9E):xtic(1) with boxes lc rgb variable
GNUPLOT
echo "chart: $out_dir/results.png"
