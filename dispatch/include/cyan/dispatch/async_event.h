#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>

#include "cyan/dispatch/detail/schedule_awaiter.h"
#include "cyan/dispatch/detail/wait_list.h"

namespace cyan::dispatch {

/// A manual-reset event for coroutines: wait() suspends the task until the event is set; set()
/// wakes every task waiting then (each on its home, see task) and lets later waits through until
/// reset().
///
/// set() with no task waiting, reset(), is_set() and a wait() on a set event are one atomic
/// operation each: no lock, no system call, no allocation (nor does waiting allocate). A stop
/// request resumes a waiting task at once with std::system_error(operation_canceled). A set()
/// and a stop request racing for one waiter are decided so that the waiter sees one of them:
/// woken by the set, its wait returns normally. Destroying a waiting task withdraws it.
///
/// Every member may be called from any thread. The event must outlive its waiters.
class async_event {
 public:
  /// An event, set or not.
  explicit async_event(bool initially_set = false) noexcept : state_(initially_set ? kSet : 0) {}
  async_event(const async_event&) = delete;
  async_event& operator=(const async_event&) = delete;

  /// Sets the event and wakes every waiting task.
  void set() noexcept {
    if ((state_.fetch_or(kSet, std::memory_order_acq_rel) & kWaiters) != 0) [[unlikely]] {
      wake_all();
    }
  }
  /// Clears the event: later waits suspend until the next set(). Tasks a set() woke already
  /// are not affected.
  void reset() noexcept { state_.fetch_and(~kSet, std::memory_order_relaxed); }
  /// Whether the event is set.
  [[nodiscard]] bool is_set() const noexcept {
    return (state_.load(std::memory_order_acquire) & kSet) != 0;
  }

  /// `co_await e.wait()` returns at once when the event is set, else suspends until set().
  /// Throws std::system_error(operation_canceled) on a stop request (before or during the
  /// wait).
  [[nodiscard]] auto wait() noexcept { return wait_awaiter(*this); }

 private:
  // state_ bits: kSet; kWaiters means the waiter list is not empty (set and cleared only under
  // the list's lock).
  static constexpr std::uint32_t kSet = 1;
  static constexpr std::uint32_t kWaiters = 2;

  class wait_awaiter : public detail::sync_wait {
   public:
    explicit wait_awaiter(async_event& event) noexcept
        : sync_wait(event.waiters_, nullptr), event_(event) {}

    [[nodiscard]] bool await_ready() const noexcept { return event_.is_set(); }
    template <typename Promise>
    bool await_suspend(std::coroutine_handle<Promise> suspended) {
      return suspend(suspended, [this] {
        // Announce the waiter before looking: a set() after this sees kWaiters and comes
        // for it; one before it is seen here.
        const std::uint32_t seen = event_.state_.fetch_or(kWaiters, std::memory_order_acq_rel);
        if ((seen & kSet) == 0) {
          return attempt::wait;
        }
        if (event_.waiters_.empty()) {
          event_.state_.fetch_and(~kWaiters, std::memory_order_relaxed);
        }
        return attempt::done;
      });
    }
    void await_resume() {
      if (finish()) {
        detail::throw_operation_canceled(
            "cyan::dispatch::async_event: cancelled by a stop request");
      }
    }

   private:
    async_event& event_;
  };

  void wake_all() noexcept {
    detail::granted_chain woken;  // woken when it goes, after the lock
    std::lock_guard guard(waiters_.lock());
    waiters_.grant_all(woken);
    state_.fetch_and(~kWaiters, std::memory_order_relaxed);
  }

  static void emptied(void* self) noexcept {
    static_cast<async_event*>(self)->state_.fetch_and(~kWaiters, std::memory_order_relaxed);
  }

  std::atomic<std::uint32_t> state_;
  detail::wait_list waiters_{ &emptied, this };
};

}  // namespace cyan::dispatch
