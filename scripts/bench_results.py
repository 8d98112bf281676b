"""The rows of a benchmark run (results.csv) with their families, references and goals
(scripts/bench_goals.csv), and how the report writes their figures. Definitions: bench_report.py.
"""

import csv
import fnmatch
import os
import re
import sys

GOALS_CSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_goals.csv")
UNSTABLE_SPREAD = 2.0


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


def workload_title(workload, members):
    """The workload's name, after its benchmark's where the family has several benchmarks."""
    if len({w.benchmark for w in members}) > 1:
        return "%s: %s" % (workload.benchmark, display(workload.name))
    return display(workload.name)
