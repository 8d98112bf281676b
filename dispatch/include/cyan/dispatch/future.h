#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <system_error>
#include <utility>

#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/future_state.h"
#include "cyan/dispatch/errors.h"

namespace cyan::dispatch {

/// The result of an awaitable task (async_awaitable, thread_pool::post_awaitable,
/// handler_thread::post_awaitable): get() it, wait for it, or co_await it from a coroutine.
///
/// Like std::future it is move-only and owned by one thread at a time; the task completing it
/// may run on any thread. The task and its shared state are one block (from the frame pool, see
/// detail/frame_allocator.h: recycled, not malloc'd, once warmed up); waiting for a result
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
  /// is withdrawn unless the task has completed already, so a coroutine suspended on this future
  /// is never resumed once the future is gone (destroying the coroutine withdraws it as well:
  /// see operator co_await). Racing with the completion on another thread, exactly one side
  /// wins: the resumption starts first (it then runs concurrently with whatever destroys the
  /// future, a data race on the frame that the caller must exclude), or it never happens.
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

  /// `co_await future` suspends the coroutine until the task has finished (not at all if it
  /// has); the co_await expression yields get(). A future may be co_awaited once.
  /// - In a cyan::dispatch::task, the task resumes on the thread it suspended on (its home: a
  ///   handler thread, or any worker of the pool it ran on), whatever thread completed the
  ///   future, and a stop request to the task's stop token resumes it there at once, the
  ///   expression then throwing std::system_error(std::errc::operation_canceled).
  /// - In any other coroutine, it resumes on the thread that completed the task.
  /// Destroying the suspended coroutine (a foreign one too), or this future, before the task
  /// completes withdraws the resumption, whichever of the two goes first: the coroutine is never
  /// resumed. A destruction that races the completion on another thread is decided as in
  /// ~future().
  auto operator co_await() noexcept { return awaiter(*this); }

  void swap(future& other) noexcept { std::swap(state_, other.state_); }

 private:
  friend struct detail::future_access;

  // A foreign coroutine is resumed inline by the completing thread; one of cyan's coroutines on
  // its home (see "Home" in detail/coro_env.h), or by a stop request of its branch. For the
  // latter the completion and await_suspend() meet at a rendezvous (arrived), and the second to
  // arrive goes on with the coroutine: await_suspend() looks at the stop token after it
  // registered the continuation, which it may do only while no one can resume the coroutine.
  // A stop request and the completion exclude each other by withdraw_continuation().
  //
  // Withdrawal. A coroutine destroyed while it is suspended here (a foreign one as well as one
  // of cyan's) destroys this awaiter without await_resume(): ~awaiter() then withdraws the
  // continuation. The future may live outside the frame, and outlive it or not, so the awaiter
  // holds a reference of its own to the state from the suspension on. The withdrawal and the
  // completion (mark_ready() on the completing thread) are one RMW each on the state's flags,
  // so one of them comes first:
  // - the withdrawal: the completion finds no continuation and reads neither it nor its
  //   context, so it touches neither this awaiter nor the frame; the state lives until the last
  //   of the future, the job and this awaiter releases it.
  // - the completion: the resumption has started, and destroying the coroutine at the same
  //   time is the caller's race, as for any coroutine. A foreign coroutine's context is its
  //   frame, so the completing thread never touches this awaiter; one of cyan's is resumed
  //   through this awaiter (resume()), which reads the awaiter before it hands the coroutine on,
  //   so a branch dropped instead of resumed destroys the awaiter after its last use.
  // Either way no completing thread touches an awaiter after ~awaiter() began, so it never waits.
  struct awaiter {
    explicit awaiter(future& f) noexcept : awaited(f) {}
    awaiter(const awaiter&) = delete;
    awaiter& operator=(const awaiter&) = delete;
    ~awaiter() {
      if (held == nullptr) {
        return;  // it never suspended
      }
      stop_watch.reset();  // waits for a stop_requested() running on another thread
      if (!resumed) {
        held->withdraw_continuation();  // destroyed while suspended: see "Withdrawal"
      }
      held->release();
    }

    future& awaited;
    // The state, with this awaiter's own reference, from the suspension on.
    detail::shared_state<T>* held = nullptr;
    bool resumed = false;  // await_resume() ran: the continuation did its work, if it had any
    std::coroutine_handle<> coroutine{};
    detail::branch* owner = nullptr;
    detail::executor_ref home{};
    bool cancelled = false;
    std::atomic<bool> arrived{ false };

    struct on_stop {
      awaiter* self;
      void operator()() const noexcept { self->stop_requested(); }
    };
    std::optional<std::stop_callback<on_stop>> stop_watch;

    bool await_ready() const { return awaited.is_ready(); }

    template <typename Promise>
    bool await_suspend(std::coroutine_handle<Promise> suspended) {
      detail::shared_state<T>& state = awaited.checked();
      if constexpr (!detail::is_cyan_promise<Promise>) {
        hold(state);
        // The frame is the context, not this awaiter: see "Withdrawal".
        return state.set_continuation(&resume_inline, suspended.address());
      } else {
        coroutine = suspended;
        owner = detail::branch_of(suspended);
        home = detail::current_executor();
        if (owner == nullptr) {
          hold(state);
          return state.set_continuation(&resume, this) && !arrive();
        }
        if (detail::drop_if_abandoned(suspended, owner)) {
          return true;
        }
        if (owner->token.stop_requested()) {
          cancelled = true;
          return detail::drop_if_abandoned(suspended, owner);  // a discard's stop
        }
        hold(state);  // before stop_requested() may use it
        if (owner->token.stop_possible()) {
          stop_watch.emplace(owner->token, on_stop{ this });
        }
        if (!state.set_continuation(&resume, this)) {
          return false;  // ready meanwhile
        }
        // A stop whose callback ran before the continuation was there found nothing to
        // withdraw: it is seen here.
        if (owner->token.stop_requested() && state.revoke_continuation()) {
          cancelled = true;
          return detail::drop_if_abandoned(suspended, owner);  // a discard's stop
        }
        if (!arrive()) {
          return true;
        }
        // Completed or cancelled (its stop callback ran at once) before this returned.
        return cancelled && detail::drop_if_abandoned(suspended, owner);
      }
    }

    T await_resume() {
      resumed = true;
      stop_watch.reset();  // waits for a stop_requested() running on another thread
      if (cancelled) {
        throw std::system_error(std::make_error_code(std::errc::operation_canceled),
                                "cyan::dispatch::future: co_await cancelled by a stop request");
      }
      return awaited.get();
    }

    // Takes this awaiter's reference before the continuation is registered: from then on the
    // coroutine may be resumed, or destroyed with this awaiter, at any moment.
    void hold(detail::shared_state<T>& state) noexcept {
      state.add_reference();
      held = &state;
    }

    // acq_rel: the second to arrive acquires what the first released.
    bool arrive() noexcept { return arrived.exchange(true, std::memory_order_acq_rel); }

    static void resume_inline(void* coroutine) noexcept {
      std::coroutine_handle<>::from_address(coroutine).resume();
    }

    // The completion: resumes at home, unless await_suspend() has not returned yet.
    static void resume(void* self) noexcept {
      auto* waiting = static_cast<awaiter*>(self);
      if (waiting->arrive()) {
        detail::resume_on(waiting->home, waiting->coroutine, waiting->owner);
      }
    }

    // Withdrawing the continuation decides the race with the completion: if it is withdrawn,
    // the completion will never resume the coroutine and this does, through the home's queue
    // (this stop callback must return before the coroutine may destroy it).
    void stop_requested() noexcept {
      if (held->revoke_continuation()) {
        cancelled = true;
        if (arrive()) {
          detail::resume_later_on(home, coroutine, owner);
        }
      }
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
