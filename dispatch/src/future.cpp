#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <ctime>
#include <thread>

#include "cyan/dispatch/detail/fork_join.h"
#include "cyan/dispatch/detail/future_state.h"

namespace cyan::dispatch::detail {
namespace {

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                const timespec* timeout) noexcept {
  // Returns on a wake-up, a timeout, a signal, or at once when word != expected: every caller
  // re-checks the flags in a loop.
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, timeout,
          nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

timespec to_timespec(std::chrono::nanoseconds duration) noexcept {
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(duration);
  return timespec{ static_cast<time_t>(seconds.count()),
                   static_cast<long>((duration - seconds).count()) };
}

}  // namespace

// No lost wake-up: the waiter sets kWaiting with an RMW and then sleeps only while the word
// still equals the value it read (the kernel compares atomically). mark_ready()'s RMW sets
// kReady after or before that: after, it sees kWaiting and wakes; before, the waiter's RMW
// returns kReady (or the futex compare fails) and it does not sleep.
bool state_core::park(const timespec* timeout) noexcept {
  // acquire: pairs with the release fetch_or in mark_ready(), making the result visible.
  std::uint32_t flags = flags_.fetch_or(kWaiting, std::memory_order_acquire);
  if ((flags & kReady) != 0) {
    return true;
  }
  futex_wait(flags_, flags | kWaiting, timeout);
  return is_ready();
}

// Yields before it parks. When every core is busy (the task that is awaited among them), a
// yield hands this CPU to a worker for the rest of its time slice and the task completes without
// a futex wake; the waiter looks again a slice later and usually finds several results ready.
// Parking on every result instead costs, per result, a wake syscall on the worker, a wait syscall
// here and two context switches that preempt a worker (docs/bench/notes.md has the figures).
// With an idle core the yields return at once, so the waiter spins for at most kYieldFor, then
// parks: a long wait costs no more CPU than that.
//
// On a pool worker the wait helps instead (see "Helping wait" in pool_local.cpp): it runs other
// tasks of the pool until the result is there, parking on the futex between looks.
void state_core::wait_slow() noexcept {
  struct ready_target final : help_target {
    explicit ready_target(state_core& s) noexcept : state(s) {}
    bool done() noexcept override { return state.is_ready(); }
    void park(std::chrono::nanoseconds timeout) noexcept override {
      const timespec relative = to_timespec(timeout);
      (void)state.park(&relative);
    }
    state_core& state;
  };
  ready_target target(*this);
  if (help_if_worker(target)) {
    return;
  }
  constexpr std::chrono::microseconds kYieldFor{ 200 };
  const auto deadline = std::chrono::steady_clock::now() + kYieldFor;
  do {
    std::this_thread::yield();
    if (is_ready()) {
      return;
    }
  } while (std::chrono::steady_clock::now() < deadline);
  while (!park(nullptr)) {
  }
}

bool state_core::wait_for(std::chrono::nanoseconds timeout) noexcept {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!is_ready()) {
    auto remaining = deadline - std::chrono::steady_clock::now();
    if (remaining <= remaining.zero()) {
      return false;
    }
    timespec relative = to_timespec(remaining);
    if (park(&relative)) {
      return true;
    }
  }
  return true;
}

void state_core::mark_ready() noexcept {
  // acq_rel: the release publishes the result to the acquire loads in is_ready() and park(); the
  // acquire pairs with set_continuation()'s release, making continuation_/context_ visible.
  std::uint32_t previous = flags_.fetch_or(kReady, std::memory_order_acq_rel);
  if ((previous & kWaiting) != 0) {
    futex_wake_all(flags_);
  }
  if ((previous & kContinuation) != 0) {
    continuation_(context_);
  }
}

}  // namespace cyan::dispatch::detail
