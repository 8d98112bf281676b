#include "cyan/dispatch/detail/serial_tracker.h"

#include <stdexcept>
#include <utility>

#include "cyan/common/detail/print_exception.h"

namespace cyan::dispatch::detail {

void serial_tracker::stopping() noexcept {
  state_.fetch_or(kWatched, std::memory_order_seq_cst);
}

void serial_tracker::wait_released() {
  stopping();
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] {
    const std::uint64_t state = state_.load(std::memory_order_seq_cst);
    return (state >> kCountShift) == 0 && (state & kCallMask) == 0;
  });
}

// A drop to zero while watched also registers an on_released call in progress, in the same
// RMW, so that a waiter cannot see the tracker idle before that call has ended.
void serial_tracker::remove() noexcept {
  std::uint64_t state = state_.load(std::memory_order_relaxed);
  std::uint64_t next = 0;
  do {
    next = state - kCountOne;
    if ((next >> kCountShift) == 0 && (state & kWatched) != 0) {
      next += kCallOne;
    }
    // seq_cst: ordered after the hand-over's push (see "Stop" in outstanding_work.h).
  } while (!state_.compare_exchange_weak(state, next, std::memory_order_seq_cst,
                                         std::memory_order_relaxed));
  if ((next & kCallMask) == (state & kCallMask)) {
    return;  // not the watched drop to zero
  }
  if (on_released_ != nullptr) {
    on_released_(context_);
  }
  const std::lock_guard lock(mutex_);
  state_.fetch_sub(kCallOne, std::memory_order_seq_cst);
  idle_.notify_all();
}

void serial_tracker::report(const serial_tracker* tracker, std::exception_ptr error) noexcept {
  if (tracker != nullptr && tracker->on_error_ != nullptr &&
      tracker->on_error_(tracker->context_, error)) {
    return;
  }
  cyan::detail::print_exception("cyan::dispatch::serial_token", "a task's destructor threw", error);
}

}  // namespace cyan::dispatch::detail
