#pragma once

// The one base of a timed, cancellable wait of a coroutine on the calling handler thread's loop
// (a new timed wait derives from it): sleep_until() and sleep_for() (detail/sleep_awaiter.h),
// a socket operation's wait for readiness (net/detail/socket_core.h). It is also how code
// outside dispatch/ reaches the thread's timer wheel and resumes a task on its home.
//
// A wait, in phases:
//   admit      admit(): a task whose branch is abandoned does not wait (its drop is posted);
//              one whose stop was requested ends at once with operation_canceled.
//   start      start_wait(): notes the coroutine, its branch and the thread (its home, where
//              the coroutine resumes, and its loop); posts the deadline to the thread's timer
//              wheel, or, for a wait without one, links it to the thread (thread_bound_wait.h);
//              watches the task's stop token.
//   end        whatever comes first ends the wait, once:
//     expired    the wheel's entry fired: the wait's expiry error;                [loop thread]
//     finished   the derived wait ended it (a socket ready or closed);            [loop thread]
//     stopped    the stop callback posts a cancel job to the loop thread, which ends the
//                wait there with operation_canceled;                              [any thread]
//     lost       the thread finishes under the wait (a task that hopped there from its spawn
//                executor, whose stop(drain) does not wait for it): its teardown destroys the
//                wheel's entries unrun and ends the waits linked to it; the wait is withdrawn
//                and the task's branch dropped, as for a resumption a finished executor
//                refuses (see "Branches" in coro_env.h);                          [loop thread]
//     destroyed  the frame is destroyed while it waits: the wait is withdrawn.   [loop thread]
//   resume     finish_wait() in await_resume(): waits for a stop callback still running on
//              another thread, then reports how the wait ended.
//
// An interruptible wait (one with an interrupt_fn: a ring operation, detail/ring_wait.h) cannot
// end the moment its deadline passes or its stop comes, because the kernel may still be using
// its buffers: expired and stopped then call interrupt_fn, which asks the kernel to cancel
// (interruption::taken), and the derived wait ends it when the operation's completion comes
// (end_interrupted_wait()); when the completion came already the wait ends as the derived wait
// recorded it (interruption::completed), and without an operation as a plain wait would.
//
// The loop-thread ends never race each other; a stop request, which may come on any thread, is
// ordered against them by state_. A cancel job that the thread refuses (it finished) does
// nothing: the thread's teardown ends the wait, and may be doing so right now, so the frame is
// not the refusing thread's to touch.

#include <atomic>
#include <chrono>
#include <coroutine>
#include <optional>
#include <stop_token>
#include <system_error>

#include "cyan/common/detail/saturating_time.h"
#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/thread_bound_wait.h"
#include "cyan/event/timer_wheel.h"

namespace cyan::dispatch::detail {

/// The wheel of the calling thread's timed waits (sleep_for and socket timeouts alike): a timer
/// wheel (1 ms ticks) on the handler thread's loop, created on first use; null on a thread
/// that is not a handler thread (or pool worker). [the thread]
event::timer_wheel* this_thread_wait_wheel();
/// Destroys the calling thread's wheel, if any, with its entries unrun. [the thread]
void reset_this_thread_wait_wheel() noexcept;

/// A user's time limit as a timed_wait's timeout (a socket's or a file's operation): rounded up
/// to whole nanoseconds; zero or less fails at the first wait; a century or more is no limit.
template <typename Rep, typename Period>
[[nodiscard]] std::chrono::nanoseconds to_timeout(
    std::chrono::duration<Rep, Period> limit) noexcept {
  using timeout_type = std::chrono::nanoseconds;
  if (limit <= limit.zero()) {
    return timeout_type::zero();
  }
  constexpr timeout_type kCentury = std::chrono::hours(24 * 365 * 100);
  const timeout_type timeout = cyan::detail::saturating_ceil<timeout_type>(limit, kCentury);
  return timeout == kCentury ? timeout_type::max() : timeout;
}

/// Which tasks the calling thread runs: none (no executor's thread), its own (a handler
/// thread), or its pool's (a thread_pool worker, whose tasks resume on any worker).
enum class thread_kind { none, handler_thread, pool_worker };
[[nodiscard]] inline thread_kind this_thread_kind() noexcept {
  if (!this_thread_home.executor) {
    return thread_kind::none;
  }
  return this_thread_home.executor == this_thread_home.thread ? thread_kind::handler_thread
                                                              : thread_kind::pool_worker;
}

/// A timed, cancellable wait (see the top of this file). A derived awaiter calls admit() and
/// start_wait() from its await_suspend() and finish_wait() from its await_resume(); one with a
/// withdraw_fn calls withdraw() first in its destructor. Neither copyable nor movable: a pending
/// wait is known by address (to the wheel, the stop callback, the thread). Every member is the loop
/// thread's unless marked otherwise.
class timed_wait : private thread_bound_wait {
 public:
  using timeout_type = std::chrono::nanoseconds;
  /// A wait without a deadline.
  static constexpr timeout_type kNoTimeout = timeout_type::max();

 protected:
  /// What else a wait must be withdrawn from when it ends other than by its derived end (a
  /// socket's reader or writer slot); null when nothing.
  using withdraw_fn = void (*)(timed_wait& wait) noexcept;
  /// How an interruptible wait takes an expiry or a stop request (`why`: its error).
  enum class interruption {
    plain,      // nothing in flight: the wait ends now with `why`, as a plain wait
    taken,      // the operation is being cancelled: its completion ends the wait
    completed,  // the completion came: the wait ends now as the derived wait recorded it
  };
  using interrupt_fn = interruption (*)(timed_wait& wait, std::error_code why) noexcept;

  /// `expiry`: how the wait ends when its deadline passes: std::errc{} (no error) for a sleep,
  /// std::errc::timed_out for a socket operation.
  explicit timed_wait(std::errc expiry, withdraw_fn withdraw = nullptr,
                      interrupt_fn interrupt = nullptr) noexcept
      : thread_bound_wait(&thread_finished),
        withdraw_(withdraw),
        interrupt_(interrupt),
        expiry_(expiry) {}
  ~timed_wait();

  /// See admit() in coro_env.h: wait, dropped (await_suspend returns true) or stopped
  /// (error_ is operation_canceled; await_suspend returns false).
  using admission = detail::admission;
  /// The admit phase, for `owner` (the suspending coroutine's branch; may be null).
  [[nodiscard]] admission admit(std::coroutine_handle<> coroutine, branch* owner) noexcept;

  /// The start phase: waits until `timeout` (kNoTimeout: no deadline) or another end. Throws
  /// std::bad_alloc when the wheel cannot grow, before the wait started.
  void start_wait(std::coroutine_handle<> coroutine, branch* owner, timeout_type timeout);

  /// For a derived end that retries an operation: whether to retry now; false when the wait
  /// ended or a stop request came (its cancel job is on its way), and then nothing is to be
  /// done. A retry that would still block ends with retry_failed().
  [[nodiscard]] bool begin_retry() noexcept;
  /// After a retry that would still block: true to wait on; false when a stop request came
  /// meanwhile (it left the end to this thread: error_ = operation_canceled, end_wait()).
  [[nodiscard]] bool retry_failed() noexcept;
  /// The derived end, with error_ set as the wait's outcome: ends the wait and resumes the
  /// coroutine on its home (at once when that is this thread).
  void end_wait() noexcept;
  /// end_wait() that resumes through the home's queue even on the home, for an end inside
  /// another of the thread's tasks (a socket closed by one). Does nothing when a stop request
  /// came first (its cancel job ends the wait).
  void end_wait_later() noexcept;

  /// An interruptible wait's end, with error_ set as its outcome, when its operation completed:
  /// ends the wait and resumes the coroutine on its home, unless a stop request's cancel job is
  /// on its way (which then ends it: interrupt_fn returns false).
  void end_interrupted_wait() noexcept;

  /// The destroyed end: withdraws a wait still pending. Derived destructors call it first, so
  /// that their withdraw_fn still sees them whole; a later call does nothing.
  void withdraw() noexcept;

  /// For await_resume(): waits for a stop callback still running on another thread; returns
  /// how the wait ended (no error: expired without an expiry error, or finished so).
  [[nodiscard]] const std::error_code& finish_wait() noexcept {
    stop_watch_.reset();
    return error_;
  }

  /// How the wait ended; a derived wait may set it before it waits (a failure at once).
  std::error_code error_;

 private:
  // state_ bits. kBusy: the loop thread is retrying (begin_retry()); kStop: a stop request
  // came; kDone: the wait has ended (whoever set it resumes or drops the coroutine).
  static constexpr unsigned kBusy = 1;
  static constexpr unsigned kStop = 2;
  static constexpr unsigned kDone = 4;

  struct on_stop {
    timed_wait* self;
    void operator()() const noexcept { self->stop_requested(); }
  };
  struct expiry_entry;  // the timer wheel's closure
  struct cancel_job;    // a stop request's work on the loop thread

  static void thread_finished(thread_bound_wait& wait) noexcept {
    static_cast<timed_wait&>(wait).lost();
  }
  [[nodiscard]] bool claim_end() noexcept;
  void expired() noexcept;
  void lost() noexcept;
  void stop_requested() noexcept;
  void cancel_on_loop_thread() noexcept;
  void stop_waiting() noexcept;

  withdraw_fn withdraw_;
  interrupt_fn interrupt_;
  std::coroutine_handle<> coroutine_;
  branch* owner_ = nullptr;
  // The loop thread's: its executor is the coroutine's home, its thread the wheel's and the
  // cancel job's. Read by a stop request while the thread lives (it ends the wait first).
  const thread_home* home_ = nullptr;
  event::timer_wheel* wheel_ = nullptr;  // set while the expiry entry is in it
  event::timer_wheel::id entry_{};
  // Written by the loop thread and by the stop callback (any thread), see the bits above.
  std::atomic<unsigned> state_{ 0 };
  std::errc expiry_;
  bool stop_interrupted_ = false;  // the cancel job ran and interrupt_fn took it
  std::optional<std::stop_callback<on_stop>> stop_watch_;
};

}  // namespace cyan::dispatch::detail
