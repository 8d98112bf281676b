#pragma once

// The awaiter of sleep_until() and sleep_for() (cyan/dispatch/sleep.h): a timed_wait on the
// calling handler thread's timer wheel, or, on a thread that is no executor's, a delayed job on
// the global pool awaited as its future.

#include <chrono>
#include <coroutine>
#include <memory>
#include <system_error>
#include <utility>

#include "cyan/dispatch/async.h"
#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/timed_wait.h"
#include "cyan/dispatch/future.h"

namespace cyan::dispatch::detail {

/// What sleep_until() returns (see there).
class [[nodiscard]] sleep_awaiter : private timed_wait {
 public:
  using clock = std::chrono::steady_clock;

  explicit sleep_awaiter(clock::time_point due) noexcept : timed_wait(std::errc{}), due_(due) {}
  /// For sleep_for(): `now` is the clock reading `due` was computed from (due > now), which
  /// spares two more readings.
  sleep_awaiter(clock::time_point due, clock::time_point now) noexcept
      : timed_wait(std::errc{}), due_(due), now_(now) {}

  [[nodiscard]] bool await_ready() const noexcept {
    return now_ == clock::time_point::min() && due_ <= clock::now();
  }

  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) {
    if (current_executor()) {
      return suspend(suspended, branch_of(suspended));
    }
    // Not a loop thread: a delayed job on the global pool, awaited as its future.
    off_loop_ = std::make_unique<off_loop>(
        global_concurrent_pool().post_awaitable([] {}, due_ - clock::now()));
    return off_loop_->awaiter.await_suspend(suspended);
  }

  void await_resume();

 private:
  using timer_awaiter = decltype(std::declval<future<void>&>().operator co_await());
  struct off_loop {
    explicit off_loop(future<void>&& due) noexcept : timer(std::move(due)) {}
    future<void> timer;
    timer_awaiter awaiter{ timer };
  };

  bool suspend(std::coroutine_handle<> coroutine, branch* owner);

  clock::time_point due_;
  clock::time_point now_ = clock::time_point::min();  // min: not known
  std::unique_ptr<off_loop> off_loop_;                // off a loop thread only
};

}  // namespace cyan::dispatch::detail
