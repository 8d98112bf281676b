#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <utility>

#include "cyan/dispatch/detail/schedule_awaiter.h"
#include "cyan/dispatch/detail/wait_list.h"

namespace cyan::dispatch {

class async_mutex;

/// What `co_await m.scoped_lock()` yields: owns the lock of an async_mutex and unlocks it when
/// destroyed (or at unlock()). Move-only; may be moved to, and destroyed on, another thread.
class [[nodiscard]] async_mutex_lock {
 public:
  async_mutex_lock() noexcept = default;
  async_mutex_lock(async_mutex_lock&& other) noexcept
      : mutex_(std::exchange(other.mutex_, nullptr)) {}
  async_mutex_lock& operator=(async_mutex_lock&& other) noexcept {
    async_mutex_lock(std::move(other)).swap(*this);
    return *this;
  }
  ~async_mutex_lock() { unlock(); }

  /// Unlocks now (hands the lock to the first waiter, if any); later calls do nothing.
  void unlock() noexcept;
  /// Whether this guard still owns the lock.
  [[nodiscard]] bool owns_lock() const noexcept { return mutex_ != nullptr; }
  void swap(async_mutex_lock& other) noexcept { std::swap(mutex_, other.mutex_); }

 private:
  friend class async_mutex;
  explicit async_mutex_lock(async_mutex& mutex) noexcept : mutex_(&mutex) {}
  async_mutex* mutex_ = nullptr;
};

/// A mutex for coroutines: a task that finds it locked suspends (no thread ever blocks) and is
/// handed the lock in arrival order (FIFO: an unlock passes the lock straight to the first
/// waiter, so no later locker can overtake it).
///
/// Uncontended, locking and unlocking are one atomic compare-and-swap each: no lock, no system
/// call, no allocation. Waiting allocates nothing either (the waiter lives in the awaiting
/// frame). A waiting task resumes on its home (see task); a stop request of the waiting task
/// resumes it at once with std::system_error(operation_canceled), without the lock. Whichever of
/// a hand-off and a stop request comes first wins: a cancelled scoped_lock never holds the lock,
/// and a hand-off is never lost (a waiter destroyed after it was handed the lock — its task
/// discarded — passes it on). Destroying a waiting task withdraws it.
///
/// Every member may be called from any thread. The mutex must outlive its waiters and guards.
class async_mutex {
 public:
  async_mutex() noexcept = default;
  async_mutex(const async_mutex&) = delete;
  async_mutex& operator=(const async_mutex&) = delete;

  /// Takes the lock if it is free; never waits.
  [[nodiscard]] bool try_lock() noexcept {
    std::uint32_t expected = kUnlocked;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  /// Releases the lock, handing it to the first waiter if there is one. Only the lock's owner
  /// may call it (the guard does so for you).
  void unlock() noexcept {
    std::uint32_t expected = kLocked;
    if (!state_.compare_exchange_strong(expected, kUnlocked, std::memory_order_release,
                                        std::memory_order_relaxed)) [[unlikely]] {
      unlock_to_waiter();
    }
  }

  /// `auto guard = co_await m.scoped_lock();` takes the lock, suspending until it is handed
  /// over; the guard unlocks. Throws std::system_error(operation_canceled) on a stop request
  /// (before or during the wait).
  [[nodiscard]] auto scoped_lock() noexcept { return lock_awaiter(*this); }

 private:
  friend class async_mutex_lock;

  // state_: kLockedWaiters means the waiter list is not empty; only code under the list's lock
  // moves the state to or from it, the fast paths only between kUnlocked and kLocked.
  static constexpr std::uint32_t kUnlocked = 0;
  static constexpr std::uint32_t kLocked = 1;
  static constexpr std::uint32_t kLockedWaiters = 2;

  class lock_awaiter : public detail::sync_wait {
   public:
    explicit lock_awaiter(async_mutex& mutex) noexcept
        : sync_wait(mutex.waiters_, &give_back), mutex_(mutex) {}
    lock_awaiter(lock_awaiter&&) noexcept = default;  // before it is awaited only
    ~lock_awaiter() { withdraw(); }

    [[nodiscard]] bool await_ready() noexcept { return mutex_.try_lock(); }
    template <typename Promise>
    bool await_suspend(std::coroutine_handle<Promise> suspended) {
      return suspend(suspended,
                     [this] { return mutex_.lock_or_mark() ? attempt::done : attempt::wait; });
    }
    async_mutex_lock await_resume() {
      if (finish()) {
        detail::throw_operation_canceled(
            "cyan::dispatch::async_mutex: cancelled by a stop request");
      }
      return async_mutex_lock(mutex_);
    }

   private:
    // Handed the lock (or took it), then destroyed before it resumed or declined: it goes on.
    static void give_back(sync_wait& waiter) noexcept {
      static_cast<lock_awaiter&>(waiter).mutex_.unlock();
    }
    async_mutex& mutex_;
  };

  // Under the list's lock: takes the lock if free (true), or marks that waiters are coming.
  bool lock_or_mark() noexcept {
    std::uint32_t seen = state_.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint32_t next = seen == kUnlocked ? kLocked : kLockedWaiters;
      if (state_.compare_exchange_weak(seen, next, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return seen == kUnlocked;
      }
    }
  }

  void unlock_to_waiter() noexcept {
    detail::sync_wait* next = nullptr;
    {
      std::lock_guard guard(waiters_.lock());
      next = waiters_.grant_front();
      if (next == nullptr) {
        // The waiters were cancelled meanwhile (which set kLocked): plain unlock. No fast path
        // can move the state from kLocked, only its owner, which is here.
        state_.store(kUnlocked, std::memory_order_release);
        return;
      }
      // The lock passes to `next`: it stays locked, with or without more waiters.
      state_.store(waiters_.empty() ? kLocked : kLockedWaiters, std::memory_order_release);
    }
    next->wake();
  }

  static void emptied(void* self) noexcept {
    static_cast<async_mutex*>(self)->state_.store(kLocked, std::memory_order_relaxed);
  }

  std::atomic<std::uint32_t> state_{ kUnlocked };
  detail::wait_list waiters_{ &emptied, this };
};

inline void async_mutex_lock::unlock() noexcept {
  if (async_mutex* mutex = std::exchange(mutex_, nullptr)) {
    mutex->unlock();
  }
}

}  // namespace cyan::dispatch
