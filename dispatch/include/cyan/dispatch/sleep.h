#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <memory>
#include <optional>
#include <stop_token>
#include <utility>

#include "cyan/dispatch/async.h"
#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/schedule_awaiter.h"
#include "cyan/dispatch/future.h"
#include "cyan/event/timer_wheel.h"

namespace cyan::dispatch {

namespace detail {

/// The timer wheel (1 ms ticks) of the calling handler thread's loop, created on first use;
/// null on a thread that is not a handler thread (or pool worker). [the thread]
event::timer_wheel* this_thread_sleep_wheel();
/// Destroys the calling thread's wheel, if any, with its entries unrun. [the thread]
void reset_this_thread_sleep_wheel() noexcept;

/// What sleep_until() returns (see there).
class [[nodiscard]] sleep_awaiter {
 public:
  using clock = std::chrono::steady_clock;

  explicit sleep_awaiter(clock::time_point due) noexcept : due_(due) {}
  /// For sleep_for(): `now` is the clock reading `due` was computed from (due > now), which
  /// spares two more readings.
  sleep_awaiter(clock::time_point due, clock::time_point now) noexcept : due_(due), now_(now) {}
  sleep_awaiter(const sleep_awaiter&) = delete;
  sleep_awaiter& operator=(const sleep_awaiter&) = delete;
  ~sleep_awaiter();

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
  // The wheel's entry: 8 bytes, stored without allocation. Destroyed unrun (the thread's
  // wheel went away with the thread) it drops the task's branch.
  struct fire {
    sleep_awaiter* self;
    explicit fire(sleep_awaiter* owner) noexcept : self(owner) {}
    fire(fire&& other) noexcept : self(std::exchange(other.self, nullptr)) {}
    fire& operator=(fire&&) = delete;
    ~fire() {
      if (self != nullptr) {
        self->lost();
      }
    }
    void operator()() noexcept { std::exchange(self, nullptr)->fired(); }
    // For the wheel (event::detail::wheel_prefetchable): the awaiter first, then the frame the
    // resumption jumps into and the branch it checks.
    void prefetch(unsigned step) const noexcept {
      if (step == 1) {
        __builtin_prefetch(self);
        __builtin_prefetch(&self->claimed_);
        return;
      }
      __builtin_prefetch(self->coroutine_.address());
      if (self->owner_ != nullptr) {
        __builtin_prefetch(&self->owner_->root);
      }
    }
  };
  struct on_stop {
    sleep_awaiter* self;
    void operator()() const noexcept { self->stop_requested(); }
  };
  struct cancel_job;  // a stop request's work on the loop thread
  using timer_awaiter = decltype(std::declval<future<void>&>().operator co_await());
  struct off_loop {
    explicit off_loop(future<void>&& due) noexcept : timer(std::move(due)) {}
    future<void> timer;
    timer_awaiter awaiter{ timer };
  };

  bool suspend(std::coroutine_handle<> coroutine, branch* owner);
  // Whoever claims first (the wheel, a stop request) resumes the coroutine.
  bool claim() noexcept { return !claimed_.exchange(true, std::memory_order_acq_rel); }
  void fired() noexcept;
  void lost() noexcept;
  void stop_requested() noexcept;

  clock::time_point due_;
  clock::time_point now_ = clock::time_point::min();  // min: not known
  std::coroutine_handle<> coroutine_;
  branch* owner_ = nullptr;
  const thread_home* home_ = nullptr;  // the loop thread's: its wheel holds the entry
  event::timer_wheel* wheel_ = nullptr;
  event::timer_wheel::id entry_{};
  bool cancelled_ = false;
  std::atomic<bool> claimed_{ false };
  std::optional<std::stop_callback<on_stop>> stop_watch_;
  std::unique_ptr<off_loop> off_loop_;  // off a loop thread only
};

}  // namespace detail

/// `co_await sleep_until(t)` suspends the calling coroutine until `t` (never earlier).
///
/// On a handler thread or pool worker it waits on that thread's loop, in a timer wheel of 1 ms
/// ticks (so it ends on the first tick at or after `t`: up to about 1 ms late on an idle
/// thread), without blocking the thread and without allocating once the wheel has grown;
/// 100,000 sleepers on one thread cost one loop timer. The task resumes on that thread (or any
/// worker of that pool). Elsewhere (a thread that is no executor's) it waits on the global
/// pool's timer and resumes on a global pool worker.
///
/// In a cyan::dispatch::task whose stop is requested (before or during the sleep), it resumes at
/// once, on its own thread, with std::system_error(std::errc::operation_canceled).
/// Throws std::bad_alloc when the wheel cannot grow.
inline detail::sleep_awaiter sleep_until(std::chrono::steady_clock::time_point deadline) noexcept {
  return detail::sleep_awaiter(deadline);
}

/// `co_await sleep_for(d)`: sleep_until(now + d). A duration of zero or less does not suspend.
template <typename Rep, typename Period>
detail::sleep_awaiter sleep_for(std::chrono::duration<Rep, Period> duration) noexcept {
  using clock = std::chrono::steady_clock;
  const auto now = clock::now();
  if (duration <= duration.zero()) {
    return detail::sleep_awaiter(now);
  }
  using seconds = std::chrono::duration<double>;
  if (seconds(duration) >= seconds(clock::time_point::max() - now)) {
    return detail::sleep_awaiter(clock::time_point::max(), now);
  }
  return detail::sleep_awaiter(now + std::chrono::ceil<clock::duration>(duration), now);
}

}  // namespace cyan::dispatch
