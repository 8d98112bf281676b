#!/usr/bin/env python3
"""The benchmark report: console table, summary.md and one gnuplot panel per family.

    bench_report.py [--out DIR] [results.csv]   the report of one run (DIR: beside the CSV)
    bench_report.py --compare OLD NEW           how each cyan arm's ratio moved between two runs

Definitions (also in README.md, "Benchmarks"; the families, references and goals are in
scripts/bench_goals.csv):
  reference  what a workload's ratios are against: its fastest peer (an arm that is neither
             cyan's nor a floor), its fastest floor, or a named arm
  ratio      the reference's median / the arm's median: > 1 is faster than the reference
  spread     the arm's max / min over its repetitions; above 2 it is marked "!" (not stable)
  whiskers   in the panels, the reference's median / the arm's max .. / the arm's min
  --compare  each cyan arm's ratio in both runs, against the old run's reference arm in both;
             its range is every ratio a pair of repetitions could give, the reference's min /
             the arm's max .. the reference's max / the arm's min. The arm stayed "inside the
             spread" if the new ratio lies in the old range and the old ratio in the new range;
             otherwise it MOVED. A workload without a reference compares the arm's medians.
Uses only the standard library and gnuplot.
"""

import csv
import datetime
import fnmatch
import os
import platform
import re
import subprocess
import sys

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
GOALS_CSV = os.path.join(SCRIPTS, "bench_goals.csv")
UNSTABLE_SPREAD = 2.0

CYAN_COLOUR = "#00838F"
PEER_COLOUR = "#9E9E9E"
FLOOR_COLOUR = "#5D6D7E"
GOAL_COLOUR = "#E65100"
MISSED_COLOUR = "#C62828"


# ---- reading -------------------------------------------------------------------------------


class Arm:
    """One row of results.csv."""

    def __init__(self, row, first):
        self.name = row["arm"]
        self.median = float(row["median_s"])
        self.low = float(row["min_s"])
        self.high = float(row["max_s"])
        # The harness rule: a workload's first arm is cyan's reference arm; cyan's others say so.
        self.cyan = first or self.name.startswith("cyan")
        self.floor = self.name.startswith("serial") or self.name.endswith("(floor)")

    @property
    def spread(self):
        return self.high / self.low if self.low > 0 else 0.0

    @property
    def unstable(self):
        return self.spread > UNSTABLE_SPREAD

    @property
    def kind(self):
        return "cyan" if self.cyan else "floor" if self.floor else "peer"


class Goal:
    """`arm` must be at least `factor` times faster than `versus` (None: the reference)."""

    def __init__(self, arm, text, versus):
        self.arm = arm
        self.text = text
        numerator, _, denominator = text.partition("/")
        self.factor = float(numerator) / float(denominator or 1)
        self.at_most_time = bool(denominator)  # written "1/x": at most x times the time
        self.versus = versus or None

    def describe(self, versus_name, short=False):
        if self.at_most_time:
            return "≤ %s× %s of %s" % (self.text.partition("/")[2],
                                      "time" if short else "the time", display(versus_name))
        return "≥ %s× %s" % (self.text, display(versus_name))

    def measured(self, arm, versus):
        """The figure the goal is about: a speed-up, or for "1/x" goals a time ratio."""
        if arm.median <= 0 or versus.median <= 0:
            return None
        speed_up = versus.median / arm.median
        return 1 / speed_up if self.at_most_time else speed_up

    def met(self, arm, versus):
        return arm.median > 0 and versus.median / arm.median >= self.factor * (1 - 1e-9)


class Workload:
    """One benchmark/workload of results.csv with its arms, reference and goals."""

    def __init__(self, benchmark, name):
        self.benchmark = benchmark
        self.name = name
        self.arms = []
        self.family = None
        self.reference_rule = "peer"
        self.goals = []

    @property
    def key(self):
        return self.benchmark + "/" + self.name

    def arm(self, name):
        return next((arm for arm in self.arms if arm.name == name), None)

    @property
    def reference(self):
        """The arm the ratios are against, or None (a workload of cyan arms alone)."""
        if self.reference_rule in ("peer", "floor"):
            candidates = [arm for arm in self.arms if arm.kind == self.reference_rule]
            return min(candidates, key=lambda arm: arm.median, default=None)
        return self.arm(self.reference_rule)

    @property
    def reference_label(self):
        reference = self.reference
        if reference is None:
            return "no reference"
        kind = {"peer": "best peer ", "floor": "floor "}.get(self.reference_rule, "")
        return kind + reference.name

    def ratio(self, arm):
        reference = self.reference
        if reference is None or arm.median <= 0:
            return None
        return reference.median / arm.median

    def ratio_range(self, arm):
        reference = self.reference
        if reference is None or arm.low <= 0 or arm.high <= 0:
            return None
        return reference.median / arm.high, reference.median / arm.low

    def goals_of(self, arm):
        """(goal, versus arm) for each goal about `arm` whose arms ran."""
        result = []
        for goal in self.goals:
            if (goal.arm or self.arms[0].name) != arm.name:
                continue
            versus = self.arm(goal.versus) if goal.versus else self.reference
            if versus is not None:
                result.append((goal, versus))
        return result


def read_results(path):
    """results.csv as workloads in file order."""
    workloads = {}
    with open(path, newline="") as file:
        for row in csv.DictReader(file):
            key = (row["benchmark"], row["workload"])
            workload = workloads.setdefault(key, Workload(*key))
            workload.arms.append(Arm(row, first=not workload.arms))
    return list(workloads.values())


def read_goals(path=GOALS_CSV):
    with open(path, newline="") as file:
        lines = (line for line in file if line.strip() and not line.startswith("#"))
        return list(csv.DictReader(lines))


def family_of_benchmark(benchmark, goal_lines):
    for line in goal_lines:
        if line["benchmark"] == benchmark:
            return line["family"]
    return re.sub(r"_benchmark$", "", benchmark)


def apply_goals(workloads, goal_lines):
    """Gives each workload its family, reference rule and goals from bench_goals.csv."""
    for workload in workloads:
        matching = [
            line for line in goal_lines
            if line["benchmark"] == workload.benchmark
            and fnmatch.fnmatchcase(workload.name, line["workload"])
        ]
        workload.family = (matching[0]["family"] if matching
                           else family_of_benchmark(workload.benchmark, goal_lines))
        workload.reference_rule = matching[0]["reference"] if matching else "peer"
        workload.goals = [Goal(line["arm"], line["goal"], line["versus"])
                          for line in matching if line["goal"]]


def families_in_order(workloads, goal_lines):
    """[(family, [workload...])]: the goals file's order, then new families in CSV order."""
    order = []
    for name in [line["family"] for line in goal_lines] + [w.family for w in workloads]:
        if name not in order:
            order.append(name)
    grouped = [(name, [w for w in workloads if w.family == name]) for name in order]
    return [(name, members) for name, members in grouped if members]


def load_run(path):
    try:
        workloads = read_results(path)
    except (OSError, KeyError, ValueError, TypeError) as error:
        sys.exit("bench_report: cannot read %s: %r" % (path, error))
    goal_lines = read_goals()
    apply_goals(workloads, goal_lines)
    return workloads, families_in_order(workloads, goal_lines)


# ---- formatting ----------------------------------------------------------------------------


def display(name):
    """A name as the benchmark spelled it (the CSV writes its commas as ";")."""
    return name.replace(";", ",")


def seconds(value):
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if value >= scale:
            return "%#.4g %s" % (value / scale, unit)
    return "%#.4g ns" % (value / 1e-9)


def ratio_text(ratio):
    """Two decimals, or two significant digits below 0.1 (a peer 10,000 times slower)."""
    if ratio is None:
        return "-"
    return ("%.2f×" if ratio >= 0.1 else "%.2g×") % ratio


def ascii_ratio(ratio):
    return ("%.2fx" if ratio >= 0.1 else "%.2gx") % ratio


def slug(family):
    return re.sub(r"[^a-z0-9]+", "-", family.lower()).strip("-")


def panel_file(family):
    return "panel-%s.png" % slug(family)


# ---- the console table (stdout and summary.txt) -----------------------------------------------


def console_table(workloads):
    """Every arm's median, spread ("!" above 2) and speed-up vs its workload's reference."""
    width = max([44] + [len(w.key) for w in workloads])
    lines = ["%-*s %-40s %12s %8s %14s" % (width, "benchmark/workload", "arm", "median (s)",
                                           "spread", "speed-up vs reference")]
    for workload in workloads:
        for index, arm in enumerate(workload.arms):
            ratio = workload.ratio(arm)
            lines.append("%-*s %-40s %12.4f %7.2f%s %14s" % (
                width, workload.key if index == 0 else "", arm.name, arm.median, arm.spread,
                "!" if arm.unstable else " ", "-" if ratio is None else ascii_ratio(ratio)))
        lines.append("%-*s (reference: %s)" % (width, "", workload.reference_label))
    return "\n".join(lines) + "\n"


# ---- summary.md ----------------------------------------------------------------------------


def machine_description():
    if os.environ.get("CYAN_BENCH_MACHINE"):
        return os.environ["CYAN_BENCH_MACHINE"]
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%s, %d cores, Linux %s" % (model, os.cpu_count() or 0, platform.release())


def run_date(csv_path):
    """CYAN_BENCH_DATE, or the CSV's modification time (the end of the run)."""
    if os.environ.get("CYAN_BENCH_DATE"):
        return os.environ["CYAN_BENCH_DATE"]
    mtime = os.path.getmtime(csv_path)
    return datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC")


def goal_cells(workload, arm):
    """The goal and met cells of an arm's row: one line per goal."""
    goals, verdicts = [], []
    for goal, versus in workload.goals_of(arm):
        measured = goal.measured(arm, versus)
        goals.append("%s: %s" % (goal.describe(versus.name), ratio_text(measured)))
        verdicts.append("met" if goal.met(arm, versus) else "**missed**")
    return "<br>".join(goals), "<br>".join(verdicts)


def workload_title(workload, members):
    """The workload's name, after its benchmark's where the family has several benchmarks."""
    if len({w.benchmark for w in members}) > 1:
        return "%s: %s" % (workload.benchmark, display(workload.name))
    return display(workload.name)


def markdown_rows(workload, members):
    rows = []
    reference = workload.reference
    for index, arm in enumerate(workload.arms):
        name = "**%s**" % display(arm.name) if arm.cyan else display(arm.name)
        if arm.floor:
            name += " (floor)" if not arm.name.endswith("(floor)") else ""
        spread = "%s – %s (%.2f%s)" % (seconds(arm.low), seconds(arm.high), arm.spread,
                                        "!" if arm.unstable else "")
        ratio = ratio_text(workload.ratio(arm))
        if arm is reference:
            ratio += " (reference)"
        goal, met = goal_cells(workload, arm)
        title = workload_title(workload, members) if index == 0 else ""
        cells = [title, name, seconds(arm.median), spread, ratio, goal, met]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def goal_tally(workloads):
    met = missed = 0
    for workload in workloads:
        for arm in workload.arms:
            for goal, versus in workload.goals_of(arm):
                if goal.met(arm, versus):
                    met += 1
                else:
                    missed += 1
    return met, missed


def markdown(families, csv_path):
    workloads = [w for _, members in families for w in members]
    met, missed = goal_tally(workloads)
    lines = [
        "# cyan benchmarks, %s" % run_date(csv_path),
        "",
        "Machine: %s. Rows: [%s](%s) (%d workloads, %d arms); goals: %d met, %d missed." % (
            machine_description(), os.path.basename(csv_path), os.path.basename(csv_path),
            len(workloads),
            sum(len(w.arms) for w in workloads), met, missed),
        "",
        "How to read: **ratio** is the workload's reference median / the arm's median (> 1: "
        "faster than the reference; the reference is the fastest peer, or the floor where the "
        "workload says so in `scripts/bench_goals.csv`). **Spread** is the arm's min – max over "
        "its repetitions and max / min; above 2 it is marked `!` and the figure is not a stable "
        "result. cyan's arms are in bold. A goal is the speed-up the harness checks "
        "(`≤ 2× the time` is a speed-up of at least 0.5). In the panels, bars start at 1× (the "
        "reference), whiskers span the ratio from the arm's slowest to its fastest repetition "
        "against the reference's median, and an orange tick marks where a cyan bar must reach "
        "to meet its goal (a goal against another arm than the reference is drawn converted to "
        "the reference). `scripts/bench_report.sh --compare OLD.csv NEW.csv` shows how cyan's "
        "ratios moved between two runs.",
        "",
        "| family | workloads | goals met | goals missed |",
        "|---|---|---|---|",
    ]
    for family, members in families:
        family_met, family_missed = goal_tally(members)
        lines.append("| [%s](#%s) | %d | %d | %d |" % (family, slug(family), len(members),
                                                      family_met, family_missed))
    for family, members in families:
        lines += ["", "## %s" % family, "", "![%s](%s)" % (family, panel_file(family)), "",
                  "| workload | arm | median | spread | ratio | goal | met |",
                  "|---|---|---|---|---|---|---|"]
        for workload in members:
            lines += markdown_rows(workload, members)
    return "\n".join(lines) + "\n"


# ---- the panels (gnuplot) ------------------------------------------------------------------

ROW_PX = 22
PLOT_PX = 430
CHAR_PX = 6.9  # DejaVu Sans 10 pt in pngcairo, about the mean width over these names
RATIO_COLUMN_PX = 108  # "0.00013×  6.90!"
TOP_PX = 44
BOTTOM_PX = 60
GRID_COLOUR = "#e4e4e4"
BAND_COLOUR = "#edf2f4"


def gnuplot_string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def colour(value):
    return int(value.lstrip("#"), 16)


class Row:
    """One line of a panel: a workload's title, an arm's bar, or a further goal of that arm."""

    def __init__(self, workload, title=None, arm=None, goal=None):
        self.workload = workload
        self.title = title
        self.arm = arm
        self.goal_text, self.goal_met = goal or (None, True)

    def ratio_text(self):
        """The ratio column: the ratio and, for an unstable arm, its spread."""
        arm = self.arm
        if self.workload.reference is None:
            return "no reference"
        text = "1× (ref.)" if arm is self.workload.reference else ratio_text(
            self.workload.ratio(arm))
        return text + ("  %.2f!" % arm.spread if arm.unstable else "")

    def goal_ticks(self):
        """The x of each goal: where the bar must reach, converted to the reference's axis."""
        reference = self.workload.reference
        return [goal.factor * reference.median / versus.median
                for goal, versus in self.workload.goals_of(self.arm)
                if reference is not None and versus.median > 0]


def goal_texts(workload, arm):
    """(text, met) for each goal of the arm."""
    texts = []
    for goal, versus in workload.goals_of(arm):
        met = goal.met(arm, versus)
        verdict = "✓" if met else "✗ MISSED"
        texts.append(("%s %s" % (goal.describe(versus.name, short=True), verdict), met))
    return texts


def panel_rows(members):
    """Top to bottom: each workload's title, then its arms, an arm's second goal on a line of
    its own."""
    rows = []
    for workload in members:
        rows.append(Row(workload, title=workload_title(workload, members)))
        for arm in workload.arms:
            texts = goal_texts(workload, arm) or [None]
            rows.append(Row(workload, arm=arm, goal=texts[0]))
            rows += [Row(workload, goal=text) for text in texts[1:]]
    return rows


def x_range(rows):
    values = [1.0]
    for row in rows:
        if row.arm is None or row.workload.ratio(row.arm) is None:
            continue
        values += list(row.workload.ratio_range(row.arm) or ())
        values += row.goal_ticks()
    low, high = min(values) / 1.3, max(values) * 1.3
    widen = (4.0 / (high / low)) ** 0.5
    if widen > 1:
        low, high = low / widen, high * widen
    return low, high


def x_tics(low, high):
    """Up to 7 round ratios inside the range, the finest steps that fit."""
    for steps in ((1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8), (1, 2, 5), (1, 3), (1,)):
        tics = []
        for exponent in range(-6, 7):
            tics += [step * 10.0 ** exponent for step in steps]
        tics = [t for t in tics if low <= t <= high]
        if len(tics) <= 7:
            break
    return tics


class Layout:
    """Margins shared by every panel of a run, so that the panels line up on the page."""

    def __init__(self, families):
        rows = [row for _, members in families for row in panel_rows(members)]
        arm_chars = max([len(display(row.arm.name)) for row in rows if row.arm] + [10])
        goal_chars = max([len(row.goal_text) for row in rows if row.goal_text] + [0])
        self.left_px = int(arm_chars * CHAR_PX + 20)
        self.right_px = int(RATIO_COLUMN_PX + goal_chars * CHAR_PX + 12)
        self.width = self.left_px + PLOT_PX + self.right_px

    def x(self, pixels):
        return pixels / self.width


def group_spans(rows):
    """(top y, bottom y) of each workload's arm rows, for its line at 1 and its grid."""
    spans, top = [], None
    for i, row in enumerate(rows + [None]):
        y = len(rows) - i
        if row is None or row.title is not None:
            if top is not None:
                spans.append((top + 0.5, y + 0.5))
            top = y - 1
    return spans


def panel_header(family, layout, height, rows, low, high):
    y = lambda pixels: 1 - pixels / height
    return [
        'set terminal pngcairo noenhanced size %d,%d font "DejaVu Sans,10"' % (
            layout.width, height),
        "set encoding utf8",
        'set label %s at screen %g, screen %g left font "DejaVu Sans:Bold,14"' % (
            gnuplot_string(family), layout.x(8), y(20)),
        "unset key",
        "set logscale x",
        "set xrange [%g:%g]" % (low, high),
        "set yrange [0.5:%d.5]" % len(rows),
        "set xtics (%s) nomirror" % ", ".join('"%g×" %g' % (t, t) for t in x_tics(low, high)),
        "set ytics nomirror scale 0 (%s)" % ", ".join(
            "%s %d" % (gnuplot_string(display(row.arm.name)), len(rows) - i)
            for i, row in enumerate(rows) if row.arm),
        "set xlabel %s" % gnuplot_string(
            "speed-up vs the workload's reference: its median / the arm's (log scale)"),
        "set border 1 back",
        "set lmargin at screen %g" % layout.x(layout.left_px),
        "set rmargin at screen %g" % layout.x(layout.left_px + PLOT_PX),
        "set tmargin at screen %g" % y(TOP_PX),
        "set bmargin at screen %g" % (BOTTOM_PX / height),
    ]


def panel_decorations(rows, layout, low, high):
    """Title bands and titles, each workload's grid and line at 1, the figures on the right."""
    lines = []
    for top, bottom in group_spans(rows):
        for tic in x_tics(low, high):
            lines.append("set arrow from %g, first %g to %g, first %g nohead lc rgb '%s' back"
                         % (tic, top, tic, bottom, GRID_COLOUR))
        lines.append("set arrow from 1, first %g to 1, first %g nohead lc rgb '#424242' lw 1.5 "
                     "back" % (top, bottom))
    for i, row in enumerate(rows):
        y = len(rows) - i
        if i == 0:
            for header, x in (("ratio", layout.left_px + PLOT_PX + 10),
                              ("goals", layout.left_px + PLOT_PX + RATIO_COLUMN_PX)):
                lines.append('set label "%s" at screen %g, first %d left font '
                             '"DejaVu Sans:Bold,10"' % (header, layout.x(x), y))
        if row.title is not None:
            lines.append("set object rectangle from screen 0, first %g to screen 1, first %g "
                         "fc rgb '%s' fs solid noborder behind" % (y - 0.5, y + 0.5, BAND_COLOUR))
            lines.append('set label %s at screen %g, first %d left font "DejaVu Sans:Bold,10"'
                         % (gnuplot_string(row.title), layout.x(8), y))
        if row.arm is not None:
            lines.append("set label %s at screen %g, first %d left" % (
                gnuplot_string(row.ratio_text()), layout.x(layout.left_px + PLOT_PX + 10), y))
        if row.goal_text:
            lines.append("set label %s at screen %g, first %d left tc rgb '%s'" % (
                gnuplot_string(row.goal_text),
                layout.x(layout.left_px + PLOT_PX + RATIO_COLUMN_PX), y,
                "#212121" if row.goal_met else MISSED_COLOUR))
    return lines


def panel_data(rows):
    """The data blocks: stable bars, unstable (faint) bars, whiskers and goal ticks."""
    blocks = {"bars": [], "faint": [], "whiskers": [], "ticks": [], "references": []}
    for i, row in enumerate(rows):
        y = len(rows) - i
        ratio = row.workload.ratio(row.arm) if row.arm else None
        if ratio is None:
            continue
        fill = {"cyan": CYAN_COLOUR, "peer": PEER_COLOUR, "floor": FLOOR_COLOUR}[row.arm.kind]
        if row.arm is row.workload.reference:
            blocks["references"].append("1 %d %d" % (y, colour(fill)))
        blocks["faint" if row.arm.unstable else "bars"].append("%g %d %g %g %g %g %d" % (
            ratio, y, min(1, ratio), max(1, ratio), y - 0.32, y + 0.32, colour(fill)))
        low, high = row.workload.ratio_range(row.arm)
        blocks["whiskers"].append("%g %d %g %g" % (ratio, y, low, high))
        blocks["ticks"] += ["%g %g" % (x, y - 0.42) for x in row.goal_ticks()]
    return blocks


def panel_legend(rows, blocks, layout, height):
    """One line beside the panel's title: a sample and a name for each kind of mark drawn."""
    arms = [row.arm for row in rows if row.arm]
    entries = [
        ("box", CYAN_COLOUR, "cyan"),
        ("box", PEER_COLOUR, "peer"),
        ("box", FLOOR_COLOUR, "floor") if any(arm.floor for arm in arms) else None,
        ("faint", PEER_COLOUR, "spread > 2 (!): not a stable result") if blocks["faint"] else None,
        ("whisker", "#212121", "min–max of the repetitions"),
        ("tick", GOAL_COLOUR, "goal") if blocks["ticks"] else None,
    ]
    lines, x, y = [], layout.left_px, 1 - 22.0 / height
    for kind, fill, name in [entry for entry in entries if entry]:
        left, right = layout.x(x), layout.x(x + 16)
        half = 5.0 / height
        if kind in ("box", "faint"):
            lines.append("set object rectangle from screen %g, screen %g to screen %g, screen %g "
                         "fc rgb '%s' fs solid %s noborder front" % (
                             left, y - half, right, y + half, fill,
                             "0.35" if kind == "faint" else "0.9"))
        elif kind == "whisker":
            lines.append("set arrow from screen %g, screen %g to screen %g, screen %g heads "
                         "size screen 0.003,90 lc rgb '%s'" % (left, y, right, y, fill))
        else:
            middle = layout.x(x + 8)
            lines.append("set arrow from screen %g, screen %g to screen %g, screen %g nohead "
                         "lw 3 lc rgb '%s'" % (middle, y - 1.6 * half, middle, y + 1.6 * half,
                                               fill))
        lines.append("set label %s at screen %g, screen %g left" % (
            gnuplot_string(name), layout.x(x + 22), y))
        x += 22 + len(name) * CHAR_PX + 18
    return lines


def panel_plot(blocks):
    lines = []
    for name, data in blocks.items():
        lines += ["$%s << EOD" % name] + (data or ["NaN NaN NaN NaN NaN NaN 0"]) + ["EOD"]
    lines.append(", \\\n  ".join([
        "plot $bars using 1:2:3:4:5:6:7 with boxxyerror lc rgb variable fs solid 0.9 noborder "
        "notitle",
        "$faint using 1:2:3:4:5:6:7 with boxxyerror lc rgb variable fs solid 0.35 noborder notitle",
        "$whiskers using 1:2:3:4 with xerrorbars pt 7 ps 0.45 lc rgb '#212121' notitle",
        "$ticks using 1:2:(0):(0.84) with vectors nohead lw 3 lc rgb '%s' notitle" % GOAL_COLOUR,
        "$references using 1:2:3 with points pt 13 ps 1.3 lc rgb variable notitle",
    ]))
    return lines


def panel_script(family, members, layout, path):
    rows = panel_rows(members)
    height = TOP_PX + BOTTOM_PX + ROW_PX * len(rows)
    low, high = x_range(rows)
    lines = panel_header(family, layout, height, rows, low, high)
    lines.append("set output %s" % gnuplot_string(path))
    lines += panel_decorations(rows, layout, low, high)
    blocks = panel_data(rows)
    lines += panel_legend(rows, blocks, layout, height)
    lines += panel_plot(blocks)
    return "\n".join(lines) + "\n"


def draw_panels(families, out_dir):
    """One PNG per family; stops the report if gnuplot fails."""
    layout = Layout(families)
    for family, members in families:
        path = os.path.join(out_dir, panel_file(family))
        script = panel_script(family, members, layout, path)
        result = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        sys.stderr.write(result.stderr)
        if result.returncode != 0 or not os.path.exists(path) or not os.path.getsize(path):
            sys.exit("bench_report: gnuplot failed on the %s panel" % family)


# ---- --compare OLD NEW ---------------------------------------------------------------------


def compared_ratio(reference, arm):
    """(ratio, range): the arm's ratio to `reference` and every ratio a pair of their
    repetitions could give (the reference's min / the arm's max .. its max / the arm's min)."""
    if arm.median <= 0 or arm.low <= 0 or arm.high <= 0:
        return None
    return reference.median / arm.median, (reference.low / arm.high, reference.high / arm.low)


def against_old_median(arm, later):
    """Without a reference: each run's median and range against the old median (> 1: faster)."""
    if min(arm.median, arm.low, later.median, later.low) <= 0:
        return None, None
    return ((1.0, (arm.median / arm.high, arm.median / arm.low)),
            (arm.median / later.median, (arm.median / later.high, arm.median / later.low)))


def inside_each_other(was, now):
    """Whether each run's ratio lies in the other run's ratio range."""
    (old_ratio, old_range), (new_ratio, new_range) = was, now
    return (old_range[0] <= new_ratio <= old_range[1]
            and new_range[0] <= old_ratio <= new_range[1])


def compare_workload(before, after, notes):
    """The lines of one workload present in both runs: its cyan arms' ratios, against the old
    run's reference arm in both runs (so that a change of best peer does not move them)."""
    reference = before.reference
    later_reference = after.arm(reference.name) if reference else None
    if reference is not None and later_reference is None:
        notes.append("%s: reference %s gone; the new run's is %s" % (
            before.key, reference.name, after.reference_label))
        later_reference = after.reference
    elif reference is not None and after.reference is not later_reference:
        notes.append("%s: against %s in both runs (the new run's reference: %s)" % (
            before.key, reference.name, after.reference_label))
    results = []
    for arm in [a for a in before.arms if a.cyan]:
        later = after.arm(arm.name)
        if later is None:
            notes.append("%s: arm gone: %s" % (before.key, arm.name))
            continue
        if reference is None or later_reference is None:
            if not any(note.startswith(before.key + ": no reference") for note in notes):
                notes.append("%s: no reference; each cyan arm's median against its old median"
                             % before.key)
            was, now = against_old_median(arm, later)
        else:
            was, now = compared_ratio(reference, arm), compared_ratio(later_reference, later)
        if was is None or now is None:
            notes.append("%s: %s has a zero time" % (before.key, arm.name))
            continue
        results.append((arm.name, was, now, inside_each_other(was, now)))
    for arm in [a for a in after.arms if a.cyan and before.arm(a.name) is None]:
        notes.append("%s: arm added: %s" % (before.key, arm.name))
    return results


def compare(old_path, new_path):
    old = {w.key: w for w in load_run(old_path)[0]}
    new = {w.key: w for w in load_run(new_path)[0]}
    both = [key for key in old if key in new]
    width = max([24] + [len(key) for key in both])
    print("ratio: the reference's median / the cyan arm's (> 1: faster); inside the spread: each "
          "run's ratio lies within the other run's range, reference min / arm max .. reference "
          "max / arm min")
    print("%-*s %-32s %9s %9s %8s" % (width, "benchmark/workload", "cyan arm", "old", "new",
                                      "change"))
    compared = moved = 0
    notes = []
    for key in both:
        for name, was, now, inside in compare_workload(old[key], new[key], notes):
            compared += 1
            moved += not inside
            verdict = "inside the spread" if inside else (
                "MOVED (faster)" if now[0] > was[0] else "MOVED (slower)")
            print("%-*s %-32s %9s %9s %+7.1f%%  %s" % (
                width, key, name, ascii_ratio(was[0]), ascii_ratio(now[0]),
                (now[0] / was[0] - 1) * 100, verdict))
    added = [key for key in new if key not in old]
    gone = [key for key in old if key not in new]
    notes += ["added (NEW only): %s" % key for key in added]
    notes += ["gone (OLD only): %s" % key for key in gone]
    for note in notes:
        print(note)
    print("cyan arms compared: %d, inside the spread: %d, MOVED: %d; workloads added: %d, gone: %d"
          % (compared, compared - moved, moved, len(added), len(gone)))


# ---- main ----------------------------------------------------------------------------------


def report(csv_path, out_dir):
    workloads, families = load_run(csv_path)
    table = console_table(workloads)
    sys.stdout.write(table)
    with open(os.path.join(out_dir, "summary.txt"), "w") as file:
        file.write(table)
    draw_panels(families, out_dir)
    with open(os.path.join(out_dir, "summary.md"), "w") as file:
        file.write(markdown(families, csv_path))
    print("report: %s (%s)" % (os.path.join(out_dir, "summary.md"),
                               ", ".join(panel_file(family) for family, _ in families)))


def main(argv):
    if argv[:1] == ["--compare"]:
        if len(argv) != 3:
            sys.exit("usage: bench_report.sh --compare OLD.csv NEW.csv")
        for path in argv[1:]:
            if not os.access(path, os.R_OK):
                sys.exit("bench_report: cannot read %s" % path)
        compare(argv[1], argv[2])
        return
    out_dir = None
    if argv[:1] == ["--out"] and len(argv) >= 2:
        out_dir, argv = argv[1], argv[2:]
    if len(argv) > 1:
        sys.exit("usage: bench_report.sh [--out DIR] [results.csv] | --compare OLD.csv NEW.csv")
    csv_path = argv[0] if argv else "bench-results/results.csv"
    if not os.access(csv_path, os.R_OK):
        sys.exit("bench_report: cannot read %s" % csv_path)
    out_dir = out_dir or os.path.dirname(csv_path) or "."
    os.makedirs(out_dir, exist_ok=True)
    report(csv_path, out_dir)


if __name__ == "__main__":
    main(sys.argv[1:])
