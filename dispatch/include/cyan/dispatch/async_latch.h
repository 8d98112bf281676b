#pragma once

#include <atomic>
#include <cstddef>
#include <stdexcept>

#include "cyan/dispatch/async_event.h"

namespace cyan::dispatch {

/// A single-use countdown for coroutines (std::latch's coroutine twin): count_down() lowers the
/// count; wait() suspends the task until it reaches zero, then every waiter goes on (each on
/// its home). try_wait(), count_down() before zero and a wait() after it are lock-free and make
/// no system call. Cancellation and withdrawal as for async_event. Every member may be called
/// from any thread; the latch must outlive its waiters.
class async_latch {
 public:
  /// A latch expecting `count` count-downs (zero: open from the start).
  explicit async_latch(std::size_t count) noexcept : count_(count), done_(count == 0) {}
  async_latch(const async_latch&) = delete;
  async_latch& operator=(const async_latch&) = delete;

  /// Lowers the count by `n`; at zero, wakes every waiting task. Throws std::invalid_argument
  /// when `n` exceeds the count left (the count is then unchanged).
  void count_down(std::size_t n = 1) {
    std::size_t seen = count_.load(std::memory_order_relaxed);
    do {
      if (n > seen) {
        throw std::invalid_argument("cyan::dispatch::async_latch: count_down past zero");
      }
    } while (!count_.compare_exchange_weak(seen, seen - n, std::memory_order_acq_rel,
                                           std::memory_order_relaxed));
    if (seen == n && n != 0) {
      done_.set();
    }
  }
  /// Whether the count has reached zero.
  [[nodiscard]] bool try_wait() const noexcept {
    return count_.load(std::memory_order_acquire) == 0;
  }
  /// `co_await l.wait()` returns once the count is zero (at once if it is). Throws
  /// std::system_error(operation_canceled) on a stop request (before or during the wait).
  [[nodiscard]] auto wait() noexcept { return done_.wait(); }

 private:
  std::atomic<std::size_t> count_;
  async_event done_;
};

}  // namespace cyan::dispatch
