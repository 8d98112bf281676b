#pragma once

// The benchmark harness every *_benchmark program uses, so that all of them follow one set of
// rules: arms alternate within each repetition (the machine's speed drifts for seconds at a
// time), every arm is repeated and every sample kept, the median and min–max are printed with
// ratios against the first arm (cyan's), checksums must match across arms, and one CSV row per
// arm is appended to $CYAN_BENCH_CSV.
//
// Environment: CYAN_BENCH_REPS (repetitions), CYAN_BENCH_CSV (the CSV file),
// CYAN_BENCH_ARMS=regex (run only the arms whose name it matches: POSIX extended, regexec),
// CYAN_BENCH_BUSY=1 (busy mode: every arm run, warm-up and untimed ones included, has a plain
// busy-loop child process pinned to the last CPU beside it — started before the run, killed and
// reaped after it, the same for every arm — and the suite's workload is named "<workload> [busy]"
// in the table and the CSV, so that its rows are told from the quiet ones).

#include <time.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cyan::bench {

/// One timed run of an arm: the seconds it took and a checksum of every result it produced.
struct sample {
  double seconds = 0;
  std::uint64_t checksum = 0;
};

/// Times `work` (which returns a checksum) with a steady clock: for arms with nothing to
/// exclude from the timed region.
sample time(const std::function<std::uint64_t()>& work);

/// CPU seconds used so far by the process (CLOCK_PROCESS_CPUTIME_ID) or the calling thread
/// (CLOCK_THREAD_CPUTIME_ID): for workloads whose wall time is mostly waiting.
double cpu_seconds(clockid_t clock);

/// Repetitions per arm: $CYAN_BENCH_REPS, else `fallback` (11: the fewest for a published
/// figure).
int repetitions(int fallback = 11);

/// An unsigned setting from the environment, e.g. item counts: $name, else `fallback`.
std::uint64_t env_or(const char* name, std::uint64_t fallback);

/// Whether CYAN_BENCH_BUSY asks for busy mode (a value other than "" and "0").
[[nodiscard]] bool busy_mode();

/// The pid of the busy-loop child running beside the current arm run in busy mode, else -1:
/// for tests.
[[nodiscard]] int busy_child_pid();

/// One workload of one benchmark, compared across arms.
class suite {
 public:
  suite(std::string benchmark, std::string workload);

  /// Adds an arm. `run` performs the whole workload once and reports its own timing, so that it
  /// can leave set-up (thread start, allocation) outside the timed region. The first arm added
  /// is the reference for ratios — make it cyan's.
  void add(std::string arm, std::function<sample()> run);

  /// Like add(), but this arm's checksum is not compared with the others (its work differs in
  /// kind, e.g. a serial floor that has nothing to count); its checksum is still printed.
  void add_unchecked(std::string arm, std::function<sample()> run);

  /// Makes run() start with one untimed run of every arm, in the same alternation, whose sample
  /// is not kept: for workloads whose first run pays one-time costs (memory an allocator keeps
  /// from then on, a runtime's threads), which would otherwise land in one arm's first sample.
  /// The table says so.
  void warm_up_each_arm() { warm_up_ = true; }

  /// Makes run() precede every timed run with an untimed run of the same arm, whose sample is
  /// not kept: for suites where one arm disturbs the whole machine for the arms after it
  /// (factorial_benchmark's std::async arm: docs/bench/notes.md), so that no arm's time
  /// includes what the arm before it did. Doubles the suite's running time; the table says so.
  void rerun_before_each_sample() { rerun_ = true; }

  /// Runs every arm `repetitions()` times, alternating the arms (rotating which goes first),
  /// printing progress on stderr, then prints the table. Returns false when checksums differ.
  /// Arms that CYAN_BENCH_ARMS does not match are not run: they have no samples, and the first
  /// arm that runs is the reference for ratios.
  bool run();

  /// A spread (max/min of an arm's samples) above this is marked in the table: such a figure is
  /// not a result yet.
  static constexpr double kMaxSpread = 2.0;

  /// Median seconds of an arm after run() (NaN for an arm that did not run); throws
  /// std::out_of_range for an unknown arm.
  [[nodiscard]] double median(const std::string& arm) const;

  /// max/min of an arm's samples after run() (NaN for an arm that did not run); throws
  /// std::out_of_range for an unknown arm.
  [[nodiscard]] double spread(const std::string& arm) const;

  /// The workload's name as printed: with " [busy]" in busy mode.
  [[nodiscard]] const std::string& workload() const noexcept { return workload_; }

  /// Prints a speed goal "`fast` is at least `factor`× faster than `slow`" as met or missed,
  /// with the measured factor (median(slow) / median(fast)). Returns whether it was met.
  bool goal(const std::string& fast, const std::string& slow, double factor);

  /// Prints a goal "`arm` takes at most `factor`× the time of `peer`" as met or missed.
  bool goal_at_most(const std::string& arm, const std::string& peer, double factor);

  /// Prints a goal "`arm`'s spread (max/min) is at most `factor`" as met or missed.
  bool goal_spread(const std::string& arm, double factor);

  // Each goal above whose arms did not all run (CYAN_BENCH_ARMS) prints "skipped" and returns
  // true.

 private:
  struct arm_state {
    std::string name;
    std::function<sample()> run;
    bool checked = true;
    std::vector<sample> samples;
  };
  const arm_state& find(const std::string& arm) const;
  // The first arm that ran: the reference for ratios.
  const arm_state& reference() const;
  [[nodiscard]] bool ran(const std::string& arm) const { return !find(arm).samples.empty(); }
  [[nodiscard]] bool skipped_goal(const std::string& what, const std::string& first,
                                  const std::string& second) const;
  static sample run_once(arm_state& arm);
  void print_table() const;
  static void print_samples(const arm_state& arm);
  bool check_checksums() const;
  void append_csv() const;

  std::string benchmark_;
  std::string workload_;
  std::vector<arm_state> arms_;
  bool warm_up_ = false;
  bool rerun_ = false;
};

/// Exit status for a benchmark program: 0 when every suite's checks passed.
int exit_status(bool all_checks_passed);

}  // namespace cyan::bench
