#pragma once

#include <chrono>
#include <coroutine>
#include <future>
#include <memory>
#include <utility>

#include "cyan/dispatch/detail/future_state.h"
#include "cyan/dispatch/errors.h"

namespace cyan::dispatch {

/// The result of an awaitable task (async_awaitable, thread_pool::post_awaitable,
/// handler_thread::post_awaitable): get() it, wait for it, or co_await it from a coroutine.
///
/// Like std::future it is move-only and owned by one thread at a time; the task completing it
/// may run on any thread. The task and its shared state are one heap block; waiting for a result
/// that is already there costs no allocation and no syscall. A task that never runs (discarded
/// by a stop, or delayed past its executor's stop) completes the future with task_cancelled.
/// A future converts implicitly to std::future<T> (which costs one more allocation), so code
/// written for the standard type keeps working.
///
/// Every member except valid() and the move operations throws std::future_error(no_state) on a
/// future that is not valid() (default-constructed, moved from, or already consumed by get()).
template <typename T>
class future {
 public:
  using value_type = T;

  future() noexcept = default;
  future(future&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  future& operator=(future&& other) noexcept {
    future(std::move(other)).swap(*this);
    return *this;
  }
  /// Drops this future's reference to the result. A continuation that `co_await` registered
  /// is withdrawn unless the task has completed already, so a coroutine destroyed while it is
  /// suspended on this future (its frame destroys the future) is never resumed. Racing with the
  /// completion on another thread, exactly one side wins: the resumption starts first (it then
  /// runs concurrently with whatever destroys the future, a data race on the frame that the
  /// caller must exclude), or it never happens.
  ~future() {
    if (state_ != nullptr) {
      state_->withdraw_continuation();
      state_->release();
    }
  }

  /// True when this future refers to a task's result that get() has not consumed yet.
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }

  /// True when the task has finished (or was cancelled): get() will not block.
  [[nodiscard]] bool is_ready() const { return checked().is_ready(); }

  /// Blocks until the task has finished: yields the CPU for up to 200 us (on a busy machine
  /// that lets the workers finish without waking this thread per result), then sleeps on a
  /// futex, so a long wait uses no CPU.
  void wait() const { checked().wait(); }

  /// Blocks until the task has finished or `timeout` has passed.
  template <typename Rep, typename Period>
  std::future_status wait_for(const std::chrono::duration<Rep, Period>& timeout) const {
    auto& state = checked();
    if (timeout > kForever) {
      state.wait();
      return std::future_status::ready;
    }
    return state.wait_for(std::chrono::ceil<std::chrono::nanoseconds>(timeout))
               ? std::future_status::ready
               : std::future_status::timeout;
  }

  /// Blocks until the task has finished or `deadline` (of any clock) has passed.
  template <typename Clock, typename Duration>
  std::future_status wait_until(const std::chrono::time_point<Clock, Duration>& deadline) const {
    auto& state = checked();
    // Clock need not be steady, so it is read again after every bounded sleep.
    while (!state.is_ready()) {
      auto remaining = deadline - Clock::now();
      if (remaining <= remaining.zero()) {
        return std::future_status::timeout;
      }
      (void)wait_for(remaining);
    }
    return std::future_status::ready;
  }

  /// Waits (as wait() does), then returns the task's result (moved out) or rethrows its exception
  /// (task_cancelled if it never ran). Leaves the future not valid().
  T get() {
    checked().wait();
    release_on_exit consumed{ std::exchange(state_, nullptr) };
    return consumed.state->take();
  }

  /// Converts to the standard type; the result is forwarded to it when the task finishes.
  /// Throws std::bad_alloc, or std::future_error(no_state) when not valid().
  operator std::future<T>() && {  // NOLINT(google-explicit-constructor): drop-in for std::future
    checked();
    auto bridge = std::make_unique<detail::std_future_bridge<T>>(state_);
    std::future<T> result = bridge->promise.get_future();
    state_ = nullptr;  // the bridge now owns this reference
    auto* raw = bridge.release();
    if (!raw->state->set_continuation(&detail::std_future_bridge<T>::fire, raw)) {
      detail::std_future_bridge<T>::fire(raw);
    }
    return result;
  }

  /// `co_await future` suspends the coroutine until the task has finished, then resumes it on
  /// the thread that completed the task (immediately, if it already had); the co_await
  /// expression yields get(). A future may be co_awaited once. Destroying the suspended
  /// coroutine (or this future) before the task completes cancels the resumption: see ~future().
  auto operator co_await() noexcept { return awaiter{ *this }; }

  void swap(future& other) noexcept { std::swap(state_, other.state_); }

 private:
  friend struct detail::future_access;

  struct awaiter {
    future& awaited;

    bool await_ready() const { return awaited.is_ready(); }
    bool await_suspend(std::coroutine_handle<> coroutine) {
      return awaited.checked().set_continuation(&resume, coroutine.address());
    }
    T await_resume() { return awaited.get(); }

    static void resume(void* coroutine) noexcept {
      std::coroutine_handle<>::from_address(coroutine).resume();
    }
  };

  struct release_on_exit {
    detail::shared_state<T>* state;
    ~release_on_exit() { state->release(); }
  };

  // Longer waits than this are unbounded waits (and cannot overflow the nanosecond conversion).
  static constexpr std::chrono::hours kForever{ 24 * 365 * 100 };

  explicit future(detail::shared_state<T>* state) noexcept : state_(state) {}

  detail::shared_state<T>& checked() const {
    if (state_ == nullptr) {
      throw std::future_error(std::future_errc::no_state);
    }
    return *state_;
  }

  detail::shared_state<T>* state_ = nullptr;
};

template <typename T>
void swap(future<T>& a, future<T>& b) noexcept {
  a.swap(b);
}

}  // namespace cyan::dispatch
