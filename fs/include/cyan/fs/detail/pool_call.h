#pragma once

// The pool fallback of a file operation: one blocking system call on the global pool, resumed
// on the awaiting task's home (libuv's model), for threads without a ring (the epoll backend,
// a thread_pool worker, a thread that is no executor's).
//
// A pool call is a dispatch::detail::timed_wait (its phases in detail/timed_wait.h) that is
// interruptible while its job is queued, and not once it runs. In phases:
//   start        start(): the wait starts (deadline, stop token), then the job is posted to the
//                global pool;
//   run          the job claims the call (pending -> running) and makes the blocking call, then
//                posts the finish to the wait's thread; a job that finds the call abandoned
//                does nothing;
//   finished     on the wait's thread: the result is recorded and the wait ends;
//   interrupted  the deadline or a stop request: a call still pending is abandoned and the wait
//                ends at once with the interruption's error; a call that started runs to its
//                end, and the finish reports its result (a read keeps its bytes);
//   destroyed    the frame goes while the call runs: the destructor blocks until the call has
//                returned (it may be writing into the caller's buffer).
// On a thread that is no executor's there is no wait: the job resumes the coroutine on the pool
// worker, and neither a deadline nor a stop request applies.

#include <atomic>
#include <coroutine>
#include <memory>
#include <system_error>

#include "cyan/dispatch/detail/timed_wait.h"
#include "cyan/fs/detail/call_request.h"

namespace cyan::fs::detail {

struct pool_call_state;  // the job's and the wait's (the job may outlive an abandoning wait)

/// A blocking call on the global pool, awaited (see the top of this file). Every member is the
/// awaiting thread's. Neither copyable nor movable: the finish finds it by address.
class pool_call : protected dispatch::detail::timed_wait {
 public:
  explicit pool_call(const call_request& request) noexcept
      : timed_wait(std::errc::timed_out, nullptr, &interrupt_call), request_(request) {}
  ~pool_call();

  /// The start phase: true when the coroutine waits, false when it goes on at once (its stop
  /// was requested). Throws std::system_error (executor_stopped after exit began) or
  /// std::bad_alloc before the call started.
  bool start(std::coroutine_handle<> coroutine, dispatch::detail::branch* owner,
             timeout_type timeout);

  /// For await_resume(): how the wait ended, or the call's failure (its errno).
  [[nodiscard]] std::error_code finish() noexcept;
  /// The call's result (a count, or a descriptor for an open); valid when finish() is empty.
  [[nodiscard]] int result() const noexcept;

  /// The finished phase, for the finish job: the call returned `result` (or -errno).
  void finished(int result) noexcept;

 private:
  static interruption interrupt_call(timed_wait& wait, std::error_code why) noexcept;
  void withdraw_call() noexcept;

  call_request request_;
  std::shared_ptr<pool_call_state> shared_;
  bool completed_ = false;  // the finish ran: an interruption comes too late
};

}  // namespace cyan::fs::detail
