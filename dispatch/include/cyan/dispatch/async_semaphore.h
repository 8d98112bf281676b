#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "cyan/dispatch/detail/schedule_awaiter.h"
#include "cyan/dispatch/detail/wait_list.h"

namespace cyan::dispatch {

/// A counting semaphore for coroutines: acquire() takes a unit, suspending the task while there
/// is none; release() gives units back, straight to the waiters first, in arrival order (FIFO:
/// while tasks wait, try_acquire() fails and a released unit cannot be taken by a later comer).
///
/// Without waiters, try_acquire, an acquire that finds a unit and release are one atomic
/// compare-and-swap each: no lock, no system call, no allocation (nor does waiting allocate). A
/// waiting task resumes on its home (see task); a stop request resumes it at once with
/// std::system_error(operation_canceled), holding no unit. Whichever of a release and a stop
/// request reaches a waiter first wins: a cancelled acquire never holds a unit, and a unit is
/// never lost (a waiter destroyed after it was handed one — its task discarded — releases it).
/// Destroying a waiting task withdraws it.
///
/// Every member may be called from any thread. The semaphore must outlive its waiters.
class async_semaphore {
 public:
  /// The most units a semaphore can count.
  static constexpr std::size_t max() noexcept { return SIZE_MAX >> 2; }

  /// A semaphore with `initial` units. Throws std::invalid_argument above max().
  explicit async_semaphore(std::size_t initial) : state_(checked(initial) << kShift) {}
  async_semaphore(const async_semaphore&) = delete;
  async_semaphore& operator=(const async_semaphore&) = delete;

  /// Takes a unit if one is free and no task waits for one; never waits.
  [[nodiscard]] bool try_acquire() noexcept {
    std::size_t seen = state_.load(std::memory_order_relaxed);
    while ((seen & kWaiters) == 0 && seen >= kUnit) {
      if (state_.compare_exchange_weak(seen, seen - kUnit, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  /// `co_await s.acquire()` takes a unit, suspending until one is handed over. Throws
  /// std::system_error(operation_canceled) on a stop request (before or during the wait).
  [[nodiscard]] auto acquire() noexcept { return acquire_awaiter(*this); }

  /// Gives `n` units back: to waiting tasks first (each resumes on its home), the rest to the
  /// count. Throws std::overflow_error when the rest would take the count past max(), waiters
  /// or not (nothing is released then).
  void release(std::size_t n = 1) {
    std::size_t seen = state_.load(std::memory_order_relaxed);
    while ((seen & kWaiters) == 0) {
      if (n > max() - (seen >> kShift)) {
        throw_past_max();
      }
      if (state_.compare_exchange_weak(seen, seen + n * kUnit, std::memory_order_release,
                                       std::memory_order_relaxed)) {
        return;
      }
    }
    release_to_waiters(n, limit::checked);
  }

  /// The units free now (a snapshot).
  [[nodiscard]] std::size_t available() const noexcept {
    return state_.load(std::memory_order_relaxed) >> kShift;
  }

 private:
  // state_: units << kShift | kWaiters. kWaiters means the waiter list is not empty (and then
  // no unit is free: release hands units to waiters first); only code under the list's lock sets
  // or clears it, and the fast paths do not touch a state that has it.
  static constexpr std::size_t kWaiters = 1;
  static constexpr unsigned kShift = 1;
  static constexpr std::size_t kUnit = std::size_t{ 1 } << kShift;

  // Whether release_to_waiters() refuses units past max(): a give-back returns a unit that
  // was counted before, so it needs no check (and must not throw).
  enum class limit { checked, unchecked };

  [[noreturn, gnu::cold]] static void throw_past_max() {
    throw std::overflow_error("cyan::dispatch::async_semaphore: release past max()");
  }

  static std::size_t checked(std::size_t initial) {
    if (initial > max()) {
      throw std::invalid_argument("cyan::dispatch::async_semaphore: more units than max()");
    }
    return initial;
  }

  class acquire_awaiter : public detail::sync_wait {
   public:
    explicit acquire_awaiter(async_semaphore& semaphore) noexcept
        : sync_wait(semaphore.waiters_, &give_back), semaphore_(semaphore) {}
    acquire_awaiter(acquire_awaiter&&) noexcept = default;  // before it is awaited only
    ~acquire_awaiter() { withdraw(); }

    [[nodiscard]] bool await_ready() noexcept { return semaphore_.try_acquire(); }
    template <typename Promise>
    bool await_suspend(std::coroutine_handle<Promise> suspended) {
      return suspend(suspended, [this] {
        return semaphore_.acquire_or_mark() ? attempt::done : attempt::wait;
      });
    }
    void await_resume() {
      if (finish()) {
        detail::throw_operation_canceled(
            "cyan::dispatch::async_semaphore: cancelled by a stop request");
      }
    }

   private:
    // Handed a unit (or took one), then destroyed before it resumed or declined: it goes back.
    static void give_back(sync_wait& waiter) noexcept {
      static_cast<acquire_awaiter&>(waiter).semaphore_.release_to_waiters(1, limit::unchecked);
    }
    async_semaphore& semaphore_;
  };

  // Under the list's lock: takes a unit if one is free (true), or marks that waiters are coming.
  bool acquire_or_mark() noexcept {
    std::size_t seen = state_.load(std::memory_order_relaxed);
    for (;;) {
      const bool take = seen >= kUnit;  // with units free there are no waiters
      if (state_.compare_exchange_weak(seen, take ? seen - kUnit : kWaiters,
                                       std::memory_order_acquire, std::memory_order_relaxed)) {
        return take;
      }
    }
  }

  void release_to_waiters(std::size_t n, limit check);
  void add_to_count(std::size_t n, limit check);

  static void emptied(void* self) noexcept {
    // Waiters meant no free units: none now either.
    static_cast<async_semaphore*>(self)->state_.store(0, std::memory_order_relaxed);
  }

  std::atomic<std::size_t> state_;
  detail::wait_list waiters_{ &emptied, this };
};

// Under the lock, before anything is handed over: a release that would take the count past
// max() throws here, so it changes nothing.
inline void async_semaphore::release_to_waiters(std::size_t n, limit check) {
  detail::granted_chain woken;  // woken when it goes, after the lock
  std::lock_guard guard(waiters_.lock());
  const std::size_t granted = waiters_.size_up_to(n);
  if (check == limit::checked && n - granted > max() - available()) {
    throw_past_max();
  }
  for (std::size_t i = 0; i < granted; ++i) {
    woken.add(*waiters_.grant_front());
  }
  n -= granted;
  if (n > 0) {
    add_to_count(n, check);
  } else if (waiters_.empty()) {
    state_.fetch_and(~kWaiters, std::memory_order_release);
  }
}

// Under the lock, with no waiter left: the rest go to the count. With the flag still set the
// state holds no unit (units and waiters never coexist) and no fast path touches it; without it
// (the waiters were cancelled before this took the lock) the fast paths run alongside.
inline void async_semaphore::add_to_count(std::size_t n, limit check) {
  std::size_t seen = state_.load(std::memory_order_relaxed);
  if ((seen & kWaiters) != 0) {
    state_.store(n << kShift, std::memory_order_release);
    return;
  }
  for (;;) {
    if (check == limit::checked && n > max() - (seen >> kShift)) {
      // A fast-path release came in meanwhile. Nothing was granted: with a grant the flag would
      // still be set (the list was not empty when this took the lock).
      throw_past_max();
    }
    // release: pairs with the acquire of try_acquire()'s CAS.
    if (state_.compare_exchange_weak(seen, seen + (n << kShift), std::memory_order_release,
                                     std::memory_order_relaxed)) {
      return;
    }
  }
}

}  // namespace cyan::dispatch
