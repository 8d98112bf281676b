#pragma once

// The idle policy of a handler thread's round (see "The round" in handler_thread_runtime.cpp):
// when the busy thread lets its loop run, what the thread does when a round found no work (poll
// its loop, spin, or sleep: a nap or a deep sleep), and what it learns from how each went.
// Private to the dispatch library.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <thread>
#include <utility>

#include "cyan/common/cache_line.h"
#include "cyan/common/detail/adaptive_attempts.h"
#include "cyan/dispatch/detail/inbox.h"
#include "cyan/dispatch/detail/spin_governor.h"

namespace cyan::dispatch::detail {

/// The decisions of an idle handler thread, phase by phase, as seastar's reactor has them for
/// its pollers: worked() after a round that ran work; keep_looking() after one that found none;
/// enter_sleep(), then sleep_refused() or fence_timed(), when it tries to sleep; left_sleep()
/// when it wakes. The runtime does the acting (the loop's turns, the inbox's announcement, the
/// blocking turn); this type only decides and learns.
///
/// Thread rules: the handler thread's only. A concrete class with inline members, on the
/// round's hot path: no virtual calls, the same decisions as when they were written into the
/// round itself.
class idle_policy {
 public:
  using clock = std::chrono::steady_clock;

  /// The sleep the thread tries next (enter_sleep()).
  struct sleep_plan {
    /// heavy: announced with the process-wide fence, unbounded; light: a nap (see "Naps" in
    /// inbox.h), bounded by handler_thread_options::nap.
    inbox::sleep_fence fence;
    /// The heavy fence is tried where a nap would do: time it and say (fence_timed()).
    bool time_fence;

    [[nodiscard]] bool nap() const noexcept { return fence == inbox::sleep_fence::light; }
  };

  /// How a sleep ended (left_sleep()).
  struct wake {
    clock::time_point fell_asleep;
    /// The time the loop read for whatever ended the sleep (never before fell_asleep).
    clock::time_point woke_at;
    bool nap_expired;   ///< a nap that ended with nothing to do (its timer fired)
    bool post_waiting;  ///< the inbox looks busy: a post ended the sleep
    bool by_loop;       ///< the loop's callbacks (io, a timer) ended it, not a post or the pool
  };

  idle_policy(std::chrono::nanoseconds spin_before_sleep, std::chrono::nanoseconds nap) noexcept
      : spin_before_sleep_(spin_before_sleep),
        naps_(nap > nap.zero()),
        spin_(std::chrono::ceil<clock::duration>(spin_before_sleep)) {}

  // ---- after a round that ran work ----------------------------------------------------------

  /// The round ran `taken` tasks. Returns whether the busy thread's loop is due a non-blocking
  /// turn (its timers and io): every kLoopPollInterval, a system call each time. The clock is
  /// read only every few rounds because reading it costs more than a tiny task.
  [[nodiscard]] bool worked(std::size_t taken) noexcept {
    nap_expired_ = false;
    loop_woke_ = false;
    tasks_since_clock_ += taken;
    if (++rounds_since_clock_ < kRoundsPerClockCheck && tasks_since_clock_ < kTasksPerClockCheck) {
      return false;
    }
    rounds_since_clock_ = 0;
    tasks_since_clock_ = 0;
    return clock::now() - last_poll_ >= kLoopPollInterval;
  }

  /// A turn of the loop ended at `when` (the loop's time when it ran callbacks, else a clock
  /// reading).
  void loop_turned(clock::time_point when) noexcept { last_poll_ = when; }

  // ---- after a round that found nothing -----------------------------------------------------

  /// Looks a little longer before sleeping: when the loop ended the last sleep, turns of the
  /// loop (`poll_loop()`: whether a turn ran callbacks); otherwise a spin probing `has_work()`.
  /// Returns true when something turned up (go round again), false to sleep.
  template <typename PollLoop, typename HasWork>
  [[nodiscard]] bool keep_looking(PollLoop&& poll_loop, HasWork&& has_work) {
    return loop_woke_ ? poll_after_wake(poll_loop) : spin(has_work);
  }

  // ---- trying to sleep ----------------------------------------------------------------------

  /// A nap first (see "Naps" in inbox.h): announced without the heavy fence, bounded by the
  /// nap timer. Only after a nap that ended with nothing to do does the next sleep announce
  /// with the heavy fence and go without a bound, so a thread pays that fence once per idle
  /// period, not once per gap between two messages. The next sleep, not this one: the thread
  /// first goes back through its round (its inbox, the idle hook, which may re-mark a pool
  /// worker idle).
  ///
  /// But the fence costs that much only when it interrupts other running threads of the
  /// process. When none runs (a lone thread serving sockets at light load, the others asleep)
  /// it is one system call, cheaper than a nap's timers (a bounded wait in the kernel, and a
  /// timerfd for bounds below 1 ms that often fires in a later sleep; docs/bench/notes.md). So
  /// the heavy fence is tried before naps too, while it keeps being cheap (cheap_fence_,
  /// common/detail/adaptive_attempts.h); once it was dear twice in a row, naps again, retrying
  /// every 16th to 256th sleep. Either way the sleep is correct: unbounded after the heavy
  /// fence, bounded after the light one.
  [[nodiscard]] sleep_plan enter_sleep() noexcept {
    const bool idle_period = nap_expired_ || !naps_;
    const bool trying_fence = !idle_period && cheap_fence_.should_try();
    const bool deep = idle_period || trying_fence;
    return sleep_plan{ deep ? inbox::sleep_fence::heavy : inbox::sleep_fence::light, trying_fence };
  }

  /// The sleep check found work: it came just after the spin gave up, so a longer spin would
  /// have seen it.
  void sleep_refused() noexcept { spin_.grow(); }

  /// How long the heavy fence of a plan with time_fence took; returns whether it was dear
  /// (longer than a cheap one).
  bool fence_timed(clock::duration took) noexcept {
    const bool cheap = took <= kCheapFence;
    cheap_fence_.record(cheap);
    return !cheap;
  }

  // ---- leaving the sleep --------------------------------------------------------------------

  /// What the sleep says about the next round: poll the loop first if the loop ended it (the
  /// next event is most likely the loop's again); the next sleep is deep if it was a nap that
  /// expired; and a post that ended it early teaches the spin (learn_from_sleep()).
  void left_sleep(const wake& woke) noexcept {
    nap_expired_ = woke.nap_expired;
    last_poll_ = woke.woke_at;
    loop_woke_ = woke.by_loop;
    first_poll_after_wake_ = woke.by_loop;
    learn_from_sleep(woke.woke_at - woke.fell_asleep, woke.post_waiting);
  }

 private:
  // Rounds (or tasks) between two looks at the clock for kLoopPollInterval.
  static constexpr unsigned kRoundsPerClockCheck = 32;
  static constexpr std::size_t kTasksPerClockCheck = 256;
  // How often a busy thread still lets its loop run timers and io: a syscall each time.
  static constexpr std::chrono::microseconds kLoopPollInterval{ 500 };
  // A heavy fence that took at most this long interrupted no other running thread (it then
  // costs a system call; one that interrupts another costs a VM exit on both sides, an order of
  // magnitude more; docs/bench/notes.md): sleeping after it is cheaper than a nap. Leaves room
  // for sanitizer builds.
  static constexpr std::chrono::nanoseconds kCheapFence{ 10000 };
  // How long a spin only spins before it also yields (see spin()).
  static constexpr std::chrono::nanoseconds kSpinBeforeYield{ 2000 };
  // A yield that lasts this long let another thread run on this CPU (see yield_and_learn()).
  static constexpr std::chrono::nanoseconds kLongYield{ 3000 };

  // The first turn after a wake-up by the loop only when wake_poll_ says it is worth it (false:
  // sleep), the turns after it while they find events (as a busy raw libev loop does, without
  // announcing a sleep or reading the clock). On a request/response socket at light load the
  // first turn finds nothing (the reply went out, the next request is a round trip away): one
  // wasted epoll_wait per message (docs/bench/notes.md). Skipping it is never wrong: the
  // sleep's blocking turn returns at once if events did come.
  template <typename PollLoop>
  bool poll_after_wake(PollLoop& poll_loop) {
    if (!std::exchange(first_poll_after_wake_, false)) {
      return poll_loop();
    }
    if (!wake_poll_.should_try()) {
      return false;
    }
    const bool found = poll_loop();
    wake_poll_.record(found);
    return found;
  }

  // Spins for at most the governor's budget (detail/spin_governor.h), which adapts: a spin that
  // found work doubles it (up to spin_before_sleep, 50 µs at most), one that ran out halves it
  // (down to 1 µs). On a machine with idle cores the partner's work arrives while spinning and
  // the budget stays full; on a busy one spinning would only take the CPU from the thread that
  // is to send the work, so the budget shrinks and the thread goes to sleep almost at once; and
  // a thread that loses its CPU (preempted mid-spin, or involuntary switches in its rusage)
  // does not spin at all for a while. After kSpinBeforeYield the spin also yields at each look
  // at the clock: when the thread that is to send the work waits for this CPU (no idle core),
  // it runs then, and the handoff costs a context switch, not a wake-up.
  template <typename HasWork>
  bool spin(HasWork& has_work) noexcept {
    if (!spin_.start_idle()) {
      return false;
    }
    // Between two looks at the sources the thread pauses kPausesPerLook times: looking reads
    // each producer's ring index, and every read pulls that cache line away from a producer
    // that is writing it, so looking constantly would slow it down. The clock is read every
    // kLooksPerClockCheck looks.
    constexpr unsigned kPausesPerLook = 4;
    constexpr unsigned kLooksPerClockCheck = 8;
    const clock::time_point started = clock::now();
    const clock::time_point deadline = spin_.start_spin(started);
    for (unsigned look = 1;; ++look) {
      if (has_work()) {
        spin_.end_spin(true);
        return true;
      }
      for (unsigned pause = 0; pause < kPausesPerLook; ++pause) {
        cpu_relax();
      }
      if (look % kLooksPerClockCheck != 0) {
        continue;
      }
      const clock::time_point now = clock::now();
      if (spin_.lost_cpu(now)) {
        return false;  // it rests (see detail/spin_governor.h)
      }
      if (now >= deadline) {
        spin_.end_spin(false);
        return false;
      }
      if ((yield_at_once_ || now - started >= kSpinBeforeYield) &&
          !yield_and_learn(now, has_work)) {
        return false;  // the yield lost the CPU for long: it rests
      }
    }
  }

  // A yield that took long ran another thread on this CPU; if the work is there when it
  // returns, the sender shares this CPU, and the next spins yield at once instead of spinning
  // first. A yield that returns at once with no work means nobody else wanted the CPU: spin
  // first again. A switch to the sender is a hand-off the spin wanted (the governor expects it
  // in the thread's involuntary switches); one that kept the CPU away past the governor's
  // limit is a lost CPU all the same: returns false then.
  template <typename HasWork>
  bool yield_and_learn(clock::time_point before, HasWork& has_work) noexcept {
    std::this_thread::yield();
    const clock::time_point after = clock::now();
    if (spin_.lost_cpu(after)) {
      return false;
    }
    const bool switched = after - before >= kLongYield;
    if (switched) {
      spin_.expect_switch();
    }
    if (switched && has_work()) {
      yield_at_once_ = true;
    } else if (!switched) {
      yield_at_once_ = false;
    }
    return true;
  }

  // A sleep that a post ended sooner than a full spin would have lasted means spinning would
  // have caught the post without the wake-up syscalls: the budget grows to cover that gap.
  // Without this, two threads that talk to each other settle into sleeping on every message
  // once their budgets have shrunk below the wake-up latency (each reply then arrives only
  // after a wake-up, too late for the other's spin), and stay there.
  void learn_from_sleep(clock::duration slept, bool post_waiting) noexcept {
    if (slept >= spin_before_sleep_ || !post_waiting) {
      return;  // a long gap, or woken by the loop (a timer, io), not by a post
    }
    spin_.grow_to(std::max(spin_.budget(), slept) * 2);
  }

  const std::chrono::nanoseconds spin_before_sleep_;
  const bool naps_;  // handler_thread_options::nap is positive

  clock::time_point last_poll_{};  // the end of the loop's last turn
  unsigned rounds_since_clock_ = 0;
  std::size_t tasks_since_clock_ = 0;
  bool yield_at_once_ = false;  // the sender seems to share this CPU (see yield_and_learn())
  bool nap_expired_ = false;    // the last sleep was a nap that ended with nothing to do
  bool loop_woke_ = false;      // the last sleep (and each poll since) ran the loop's callbacks
                                // (io, a timer), not a post: poll before sleeping again
  bool first_poll_after_wake_ = false;           // loop_woke_ and no poll made since that sleep
  cyan::detail::adaptive_attempts wake_poll_;    // whether that first poll is worth making
  cyan::detail::adaptive_attempts cheap_fence_;  // whether to try the heavy fence before a nap
  spin_governor spin_;  // the spin's budget and rests (see spin() and learn_from_sleep())
};

}  // namespace cyan::dispatch::detail
