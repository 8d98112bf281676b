#!/usr/bin/env python3
"""The crossover chart of echo_crossover_benchmark: one panel per message size, the server's CPU
per message (median, whiskers min–max; log scales) against the connections, one line per arm — cyan teal,
Boost.Asio grey, the raw floors slate; solid on epoll, dashed on io_uring.

    scripts/bench_crossover.py results.csv crossover.png

Reads the rows the harness appends to $CYAN_BENCH_CSV (with or without bench.sh's header);
uses only the standard library and gnuplot.
"""

import csv
import re
import subprocess
import sys

from bench_panels import CYAN_COLOUR, FLOOR_COLOUR, PEER_COLOUR, gnuplot_string

BENCHMARK = "echo_crossover_benchmark"
FIELDS = ["benchmark", "workload", "arm", "median_s", "min_s", "max_s", "reps", "checksum"]
CELL = re.compile(r"(\d+) (B|KiB); (\d+) connections?")

# (arm, colour, dash type): io_uring dashed, epoll solid.
ARMS = [
    ("cyan echo_server", CYAN_COLOUR, 2),
    ("cyan echo_server (epoll)", CYAN_COLOUR, 1),
    ("Boost.Asio (io_uring)", PEER_COLOUR, 2),
    ("Boost.Asio coroutines", PEER_COLOUR, 1),
    ("raw io_uring (floor)", FLOOR_COLOUR, 2),
    ("raw epoll (floor)", FLOOR_COLOUR, 1),
]
LEGEND = {"cyan echo_server": "cyan (default: io_uring)", "cyan echo_server (epoll)": "cyan (epoll)",
          "Boost.Asio coroutines": "Boost.Asio (epoll)"}


def read_cells(path):
    """{size text: {arm: [(connections, median us, min us, max us)]}}, sizes in file order."""
    cells = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f, fieldnames=FIELDS):
            if row["benchmark"] != BENCHMARK:
                continue
            match = CELL.search(row["workload"])
            if match is None:
                continue
            size = "%s %s" % (match.group(1), match.group(2))
            messages = float(row["checksum"])
            us = [float(row[key]) * 1e6 / messages for key in ("median_s", "min_s", "max_s")]
            cells.setdefault(size, {}).setdefault(row["arm"], []).append(
                (int(match.group(3)), *us))
    return cells


def script(cells, out):
    width = 420 * len(cells)
    lines = [
        'set terminal pngcairo noenhanced size %d,460 font "DejaVu Sans,10"' % width,
        "set encoding utf8",
        "set output %s" % gnuplot_string(out),
        'set multiplot layout 1,%d title "echo: server CPU per message (µs) against connections, '
        '1 server thread (median, whiskers min–max; log scales)" font "DejaVu Sans:Bold,12"' % len(cells),
        "set logscale x",
        "set xrange [0.6:1700]",
        'set xtics ("1" 1, "10" 10, "100" 100, "1,000" 1000) nomirror',
        "set ytics nomirror",
        "set logscale y",  # one connection costs several times more per message than ten
        'set xlabel "connections"',
        'set ylabel "µs of server CPU per message"',
        'set grid ytics lc rgb "#e4e4e4"',
        "unset key",
    ]
    for index, (size, arms) in enumerate(cells.items()):
        lines.append("set title %s" % gnuplot_string(size + " messages"))
        if index == len(cells) - 1:  # the 64 KiB panel's lower part is empty
            lines.append("set key bottom right reverse Left samplen 3 font ',9' box "
                         "lc rgb '#c0c0c0'")
        plots, blocks = [], []
        for number, (arm, colour, dash) in enumerate(ARMS):
            points = sorted(arms.get(arm, []))
            if not points:
                continue
            name = "$%s%d" % ("p", number)
            blocks.append("%s << EOD\n%s\nEOD" % (
                name, "\n".join("%d %g %g %g" % point for point in points)))
            plots.append("%s using 1:2:3:4 with yerrorlines lw %d dt %d pt 7 ps 0.6 lc rgb %s "
                         "title %s" % (name, 3 if colour == CYAN_COLOUR else 2, dash,
                                       gnuplot_string(colour),
                                       gnuplot_string(LEGEND.get(arm, arm))))
        lines += blocks
        lines.append("plot " + ", \\\n     ".join(plots))
    lines.append("unset multiplot")
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: bench_crossover.py results.csv crossover.png")
    cells = read_cells(argv[0])
    if not cells:
        sys.exit("bench_crossover: no %s rows in %s" % (BENCHMARK, argv[0]))
    result = subprocess.run(["gnuplot"], input=script(cells, argv[1]), text=True,
                            capture_output=True)
    if result.returncode != 0 or result.stderr:
        sys.exit("bench_crossover: gnuplot: %s" % result.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
