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

import datetime
import os
import platform
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from bench_panels import draw_panels  # noqa: E402 (after the line above)
from bench_results import (ascii_ratio, display, load_run, panel_file, ratio_text,  # noqa: E402
                           seconds, slug, workload_title)


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
