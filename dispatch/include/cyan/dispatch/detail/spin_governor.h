#pragma once

// How long an idle thread spins before it sleeps, for pool workers (pool_worker_round.cpp) and
// handler threads (idle_policy.h) alike. Spinning saves a wake-up when work follows soon, but
// only when the thread has a CPU to spare: on a machine with no idle core every microsecond
// spun is taken from a thread that has work (maybe the very one that is to send it). So:
//   - the budget adapts: a spin that found work doubles it, one that ran out halves it, between
//     kMinBudget and the thread's maximum (kMaxBudget at most);
//   - a thread that lost its CPU rests: it does not spin at all for kFirstRest idle periods,
//     twice as many each time it is seen losing it again right after a rest (up to kLastRest),
//     back to kFirstRest once a spin ran without losing it. Losing the CPU shows as a gap of
//     more than kLostCpuGap between two clock reads of a spin (it was preempted, or a yield
//     ran someone else that long), or as involuntary context switches the thread did not
//     expect (getrusage(RUSAGE_THREAD).ru_nivcsw: a system call, so read every
//     kPeriodsPerSample idle periods only, and when a gap was seen, to start counting afresh).
// The decisions are pure: the caller reads the clock and passes the times; the switch count
// comes from a SwitchCounter (tests pass a fake one).
//
// Thread rules: one governor per thread, used by that thread only (no atomics). Its rusage
// counter reads the calling thread's, so the first sample is taken on that thread.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

namespace cyan::dispatch::detail {

/// The calling thread's involuntary context switches so far.
struct thread_switch_counter {
  [[nodiscard]] std::int64_t operator()() const noexcept {
    ::rusage usage{};
    if (::getrusage(RUSAGE_THREAD, &usage) != 0) {
      return 0;
    }
    return usage.ru_nivcsw;
  }
};

template <typename SwitchCounter = thread_switch_counter>
class basic_spin_governor {
 public:
  using clock = std::chrono::steady_clock;

  // The shortest and the longest budget: a spin shorter than a microsecond saves nothing a
  // wake-up costs; 50 µs bridges the gaps of a producer posting a stream.
  static constexpr clock::duration kMinBudget = std::chrono::microseconds(1);
  static constexpr clock::duration kMaxBudget = std::chrono::microseconds(50);
  // Two clock reads of a spin this far apart: the thread was off its CPU in between (a spin
  // reads the clock every few hundred ns; a preemption lasts a scheduler slice, milliseconds).
  static constexpr clock::duration kLostCpuGap = std::chrono::microseconds(100);
  // Idle periods without a spin after the CPU was lost; doubled while it keeps being lost.
  static constexpr unsigned kFirstRest = 16;
  static constexpr unsigned kLastRest = 256;
  // Idle periods between two reads of the switch count (each a system call).
  static constexpr unsigned kPeriodsPerSample = 64;

  /// `max_budget`: the thread's longest spin, capped at kMaxBudget; zero (or less): never spin.
  explicit basic_spin_governor(clock::duration max_budget = kMaxBudget,
                               SwitchCounter counter = SwitchCounter{}) noexcept
      : max_budget_(std::clamp(max_budget, clock::duration::zero(), kMaxBudget)),
        min_budget_(std::min(kMinBudget, max_budget_)),
        budget_(max_budget_),
        counter_(std::move(counter)) {}

  // ---- an idle period ------------------------------------------------------------------------

  /// The thread found no work. Returns whether it spins now (then start_spin()), false when it
  /// should go to sleep at once: spinning is off, or it rests. Every kPeriodsPerSample calls it
  /// reads the switch count; a rise beyond the expected switches (expect_switch()) counts as a
  /// lost CPU.
  [[nodiscard]] bool start_idle() noexcept {
    if (max_budget_ <= clock::duration::zero()) {
      return false;  // spinning is off: nothing to learn
    }
    if (++periods_since_sample_ >= kPeriodsPerSample) {
      periods_since_sample_ = 0;
      sample_switches();
    }
    if (rest_left_ > 0) {
      --rest_left_;
      return false;
    }
    return budget_ > clock::duration::zero();
  }

  /// The spin starts at `now`; returns when it should end.
  [[nodiscard]] clock::time_point start_spin(clock::time_point now) noexcept {
    last_read_ = now;
    return now + budget_;
  }

  /// A clock read at `now` during the spin. True when the gap since the previous read shows the
  /// thread lost its CPU: the spin ends at once (not end_spin()) and the thread rests.
  [[nodiscard]] bool lost_cpu(clock::time_point now) noexcept {
    const bool lost = now - std::exchange(last_read_, now) > kLostCpuGap;
    if (lost) {
      rest();
      // Count afresh: the switch that took the CPU is not to be counted again.
      last_switches_ = counter_();
      expected_switches_ = 0;
      have_switches_ = true;
    }
    return lost;
  }

  /// The spin ended without losing the CPU: it found work (the budget doubles) or ran out (it
  /// halves). Either way the next loss starts the rests from kFirstRest again.
  void end_spin(bool found_work) noexcept {
    recently_lost_ = false;
    if (found_work) {
      grow();
    } else {
      budget_ = std::max(budget_ / 2, min_budget_);
    }
  }

  /// Work came just after the thread gave up (the sleep check found it): the budget doubles.
  void grow() noexcept { budget_ = std::min(std::max(budget_ * 2, min_budget_), max_budget_); }

  /// The budget becomes at least `wanted` (up to the maximum): a post woke the thread that
  /// soon after it stopped spinning.
  void grow_to(clock::duration wanted) noexcept {
    budget_ = std::min(std::max(budget_, wanted), max_budget_);
  }

  /// A yield of the spin let another thread run (a hand-off to a partner on this CPU): the
  /// kernel counts it as an involuntary switch, which is not a lost CPU.
  void expect_switch() noexcept { ++expected_switches_; }

  // ---- for tests and counters -----------------------------------------------------------------

  [[nodiscard]] clock::duration budget() const noexcept { return budget_; }
  [[nodiscard]] clock::duration max_budget() const noexcept { return max_budget_; }
  [[nodiscard]] bool resting() const noexcept { return rest_left_ > 0; }
  /// Idle periods left in the current rest.
  [[nodiscard]] unsigned rest_left() const noexcept { return rest_left_; }
  [[nodiscard]] SwitchCounter& counter() noexcept { return counter_; }

 private:
  void rest() noexcept {
    rest_length_ = recently_lost_ ? std::min(rest_length_ * 2, kLastRest) : kFirstRest;
    rest_left_ = rest_length_;
    recently_lost_ = true;
  }

  void sample_switches() noexcept {
    const std::int64_t now = counter_();
    const std::int64_t expected = std::exchange(expected_switches_, 0);
    const bool first = !std::exchange(have_switches_, true);
    const std::int64_t rise = now - std::exchange(last_switches_, now);
    if (first) {
      return;  // a baseline, on the owning thread
    }
    // No rise resets nothing: a resting thread sleeps instead of spinning, so its switch count
    // stays flat whatever the machine's load; only a spin that keeps its CPU says the CPU is back.
    if (rise > expected) {
      rest();
    }
  }

  const clock::duration max_budget_;
  const clock::duration min_budget_;
  clock::duration budget_;
  clock::time_point last_read_{};       // the spin's previous clock read
  unsigned rest_left_ = 0;              // idle periods still without a spin
  unsigned rest_length_ = kFirstRest;   // the current rest's length
  bool recently_lost_ = false;          // lost the CPU, and no spin kept it since
  unsigned periods_since_sample_ = 0;   // idle periods since the switch count was read
  bool have_switches_ = false;          // last_switches_ holds a reading
  std::int64_t last_switches_ = 0;      // the switch count at the last reading
  std::int64_t expected_switches_ = 0;  // hand-off yields since that reading
  SwitchCounter counter_;
};

using spin_governor = basic_spin_governor<>;

}  // namespace cyan::dispatch::detail
