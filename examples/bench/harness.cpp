#include "bench/harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include <regex.h>

#include "bench/process.h"

namespace cyan::bench {
namespace {

double median_of(std::vector<double> values) {
  if (values.empty()) {
    return std::nan("");
  }
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

std::vector<double> seconds_of(const std::vector<sample>& samples) {
  std::vector<double> seconds;
  for (const sample& s : samples) {
    seconds.push_back(s.seconds);
  }
  return seconds;
}

// A name as one CSV field: the file is read with a plain comma split, so commas become ';'.
std::string csv_field(std::string text) {
  std::replace(text.begin(), text.end(), ',', ';');
  return text;
}

// Whether CYAN_BENCH_ARMS (a POSIX extended regex; unset or empty: every arm) lets `arm` run.
// POSIX regcomp rather than std::regex: g++ 12's <regex> trips -Wmaybe-uninitialized at -O1 with
// the sanitizers, and the harness builds with -Werror in every lane.
bool selected(const std::string& arm) {
  const char* pattern = std::getenv("CYAN_BENCH_ARMS");
  if (pattern == nullptr || *pattern == '\0') {
    return true;
  }
  regex_t compiled;
  if (const int error = regcomp(&compiled, pattern, REG_EXTENDED | REG_NOSUB); error != 0) {
    char reason[256];
    regerror(error, &compiled, reason, sizeof reason);
    throw std::invalid_argument(std::string("CYAN_BENCH_ARMS: ") + reason);
  }
  const bool match = regexec(&compiled, arm.c_str(), 0, nullptr, 0) == 0;
  regfree(&compiled);
  return match;
}

int busy_pid = -1;  // the busy child beside the current arm run (busy_child_pid())

}  // namespace

bool busy_mode() {
  const char* text = std::getenv("CYAN_BENCH_BUSY");
  return text != nullptr && *text != '\0' && std::string(text) != "0";
}

int busy_child_pid() {
  return busy_pid;
}

sample time(const std::function<std::uint64_t()>& work) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t checksum = work();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return { elapsed.count(), checksum };
}

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    return fallback;
  }
  return std::strtoull(text, nullptr, 10);
}

int repetitions(int fallback) {
  return static_cast<int>(std::max<std::uint64_t>(1, env_or("CYAN_BENCH_REPS", fallback)));
}

suite::suite(std::string benchmark, std::string workload)
    : benchmark_(std::move(benchmark)),
      workload_(busy_mode() ? std::move(workload) + " [busy]" : std::move(workload)) {}

void suite::add(std::string arm, std::function<sample()> run) {
  arms_.push_back({ std::move(arm), std::move(run), true, {} });
}

void suite::add_unchecked(std::string arm, std::function<sample()> run) {
  arms_.push_back({ std::move(arm), std::move(run), false, {} });
}

// One run of `arm`; in busy mode with a busy-loop child beside it for exactly that run.
sample suite::run_once(arm_state& arm) {
  std::unique_ptr<busy_loop_process> busy;
  if (busy_mode()) {
    busy = std::make_unique<busy_loop_process>();
    busy_pid = busy->pid();
  }
  const sample result = arm.run();
  busy.reset();  // killed and reaped before the next arm starts
  busy_pid = -1;
  return result;
}

bool suite::run() {
  std::vector<arm_state*> active;
  for (arm_state& arm : arms_) {
    if (selected(arm.name)) {
      active.push_back(&arm);
    }
  }
  if (active.empty()) {
    std::printf("\n%s — %s: no arm matches CYAN_BENCH_ARMS\n", benchmark_.c_str(),
                workload_.c_str());
    return true;
  }
  if (warm_up_) {
    for (arm_state* arm : active) {
      std::fprintf(stderr, "  [%s/%s] warm-up: %-36s\r", benchmark_.c_str(), workload_.c_str(),
                   arm->name.c_str());
      (void)run_once(*arm);
    }
  }
  const int reps = repetitions();
  for (int rep = 0; rep < reps; ++rep) {
    for (std::size_t i = 0; i < active.size(); ++i) {
      arm_state& arm = *active[(i + static_cast<std::size_t>(rep)) % active.size()];
      std::fprintf(stderr, "  [%s/%s] rep %d/%d: %-36s\r", benchmark_.c_str(), workload_.c_str(),
                   rep + 1, reps, arm.name.c_str());
      if (rerun_) {
        (void)run_once(arm);
      }
      arm.samples.push_back(run_once(arm));
    }
  }
  std::fprintf(stderr, "%90s\r", "");
  print_table();
  append_csv();
  return check_checksums();
}

const suite::arm_state& suite::reference() const {
  for (const arm_state& arm : arms_) {
    if (!arm.samples.empty()) {
      return arm;
    }
  }
  return arms_.front();
}

const suite::arm_state& suite::find(const std::string& arm) const {
  for (const arm_state& state : arms_) {
    if (state.name == arm) {
      return state;
    }
  }
  throw std::out_of_range("cyan::bench::suite: no arm named '" + arm + "'");
}

double suite::median(const std::string& arm) const {
  return median_of(seconds_of(find(arm).samples));
}

double suite::spread(const std::string& arm) const {
  const std::vector<double> seconds = seconds_of(find(arm).samples);
  if (seconds.empty()) {
    return std::nan("");
  }
  return *std::max_element(seconds.begin(), seconds.end()) /
         *std::min_element(seconds.begin(), seconds.end());
}

void suite::print_table() const {
  std::printf(
      "\n%s — %s (%zu reps%s%s, median [min–max], spread = max/min; '!' marks a spread > "
      "%.1f)\n",
      benchmark_.c_str(), workload_.c_str(), reference().samples.size(),
      warm_up_ ? " after one untimed warm-up run of each arm" : "",
      rerun_ ? ", each timed run right after an untimed run of the same arm" : "", kMaxSpread);
  const arm_state& first = reference();
  const double reference_median = median(first.name);
  for (const arm_state& arm : arms_) {
    if (arm.samples.empty()) {
      continue;  // not selected (CYAN_BENCH_ARMS)
    }
    const std::vector<double> seconds = seconds_of(arm.samples);
    const double m = median(arm.name);
    const double arm_spread = spread(arm.name);
    std::printf(
        "  %-40s %10.4f s [%.4f–%.4f] spread %5.2f%s %7.2fx the time of %s  checksum %llu\n",
        arm.name.c_str(), m, *std::min_element(seconds.begin(), seconds.end()),
        *std::max_element(seconds.begin(), seconds.end()), arm_spread,
        arm_spread > kMaxSpread ? "!" : " ", m / reference_median, first.name.c_str(),
        static_cast<unsigned long long>(arm.samples.back().checksum));
    if (arm_spread > kMaxSpread) {
      print_samples(arm);
    }
  }
}

// Every repetition of an arm whose spread is too large, in the order they ran: slow runs that
// come together point at a phase of the machine, a slow first run at a warm-up the arm lacks.
void suite::print_samples(const arm_state& arm) {
  std::printf("  %-40s   each run, in order:", "");
  for (const sample& s : arm.samples) {
    std::printf(" %.4f", s.seconds);
  }
  std::printf("\n");
}

bool suite::check_checksums() const {
  const arm_state& first = reference();
  const std::uint64_t expected = first.samples.front().checksum;
  bool ok = true;
  for (const arm_state& arm : arms_) {
    for (const sample& s : arm.samples) {
      if (arm.checked && s.checksum != expected) {
        std::printf("  CHECKSUM MISMATCH: %s gave %llu, %s gave %llu\n", arm.name.c_str(),
                    static_cast<unsigned long long>(s.checksum), first.name.c_str(),
                    static_cast<unsigned long long>(expected));
        ok = false;
      }
    }
  }
  return ok;
}

void suite::append_csv() const {
  const char* path = std::getenv("CYAN_BENCH_CSV");
  if (path == nullptr || *path == '\0') {
    return;
  }
  FILE* csv = std::fopen(path, "a");
  if (csv == nullptr) {
    std::perror(path);
    return;
  }
  for (const arm_state& arm : arms_) {
    if (arm.samples.empty()) {
      continue;  // not selected (CYAN_BENCH_ARMS)
    }
    const std::vector<double> seconds = seconds_of(arm.samples);
    std::fprintf(csv, "%s,%s,%s,%.6f,%.6f,%.6f,%zu,%llu\n", csv_field(benchmark_).c_str(),
                 csv_field(workload_).c_str(), csv_field(arm.name).c_str(), median(arm.name),
                 *std::min_element(seconds.begin(), seconds.end()),
                 *std::max_element(seconds.begin(), seconds.end()), seconds.size(),
                 static_cast<unsigned long long>(arm.samples.back().checksum));
  }
  std::fclose(csv);
}

bool suite::skipped_goal(const std::string& what, const std::string& first,
                         const std::string& second) const {
  if (ran(first) && ran(second)) {
    return false;
  }
  std::printf("  goal: %s — skipped (%s did not run: left out by CYAN_BENCH_ARMS, or not built)\n",
              what.c_str(), ran(first) ? second.c_str() : first.c_str());
  return true;
}

bool suite::goal(const std::string& fast, const std::string& slow, double factor) {
  if (skipped_goal(fast + " vs " + slow, fast, slow)) {
    return true;
  }
  const double measured = median(slow) / median(fast);
  const bool met = measured >= factor;
  std::printf("  goal: %s >= %.2fx faster than %s: measured %.2fx — %s\n", fast.c_str(), factor,
              slow.c_str(), measured, met ? "met" : "MISSED");
  return met;
}

bool suite::goal_spread(const std::string& arm, double factor) {
  if (skipped_goal(arm + " spread", arm, arm)) {
    return true;
  }
  const double measured = spread(arm);
  const bool met = measured <= factor;
  std::printf("  goal: %s spread (max/min) <= %.2f: measured %.2f — %s\n", arm.c_str(), factor,
              measured, met ? "met" : "MISSED");
  return met;
}

bool suite::goal_at_most(const std::string& arm, const std::string& peer, double factor) {
  if (skipped_goal(arm + " vs " + peer, arm, peer)) {
    return true;
  }
  const double measured = median(arm) / median(peer);
  const bool met = measured <= factor;
  std::printf("  goal: %s <= %.2fx the time of %s: measured %.2fx — %s\n", arm.c_str(), factor,
              peer.c_str(), measured, met ? "met" : "MISSED");
  return met;
}

int exit_status(bool all_checks_passed) {
  if (!all_checks_passed) {
    std::printf("benchmark checks FAILED (see CHECKSUM MISMATCH above)\n");
  }
  return all_checks_passed ? 0 : 1;
}

}  // namespace cyan::bench
