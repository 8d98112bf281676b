"""One chart per family of a benchmark run, drawn by gnuplot: a horizontal bar per arm, its
ratio to the workload's reference on a log axis, whiskers, goal ticks and the figures beside.
"""

import os
import subprocess
import sys

from bench_results import display, panel_file, ratio_text, workload_title

CYAN_COLOUR = "#00838F"
PEER_COLOUR = "#9E9E9E"
FLOOR_COLOUR = "#5D6D7E"
GOAL_COLOUR = "#E65100"
MISSED_COLOUR = "#C62828"

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


