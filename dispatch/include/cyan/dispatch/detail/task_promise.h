#pragma once

// The promise behind cyan::dispatch::task<T>. A task's coroutine suspends before its body runs
// (it is lazy) and at its end. Whoever co_awaits it registers itself as the continuation and
// runs the body by a plain call from await_suspend (start()); then:
//   1. the body finishes before that call returns (it never suspended, or was resumed on this
//      thread within the call): final_suspend, seeing that this thread is still inside start()
//      for this task (the thread-local starting_task), notes it and returns to the call, and
//      await_suspend returns false, so the awaiter goes on without a resumption and without an
//      atomic operation. A loop of synchronously finishing awaits thus uses constant stack on
//      every compiler and flag set.
//   2. the body suspended: start() and the body's end, which may come on another thread at any
//      time, meet at a rendezvous (handoff_), and the second to arrive resumes the awaiter (the
//      body's end by symmetric transfer, or start() by returning false).
// Pure symmetric transfer (await_suspend returning the task's handle) would need no such care,
// but it keeps the stack flat only where the compiler turns the transfer into a tail call:
// GCC 12 does not at -O0 or -O1, nor under ASan or TSan at any level, so a debug or sanitizer
// build would overflow the stack in such a loop. Frames come from the per-thread frame cache
// (frame_allocator.h).
//
// Affinity (see "Home" in coro_env.h): start() notes the awaiter's home when the awaiter is one
// of cyan's coroutines. If the body finishes on a thread that does not belong to that home (it
// hopped away), final_suspend posts the awaiter's resumption there instead of jumping to it.
// A foreign awaiter is resumed by the jump, on whatever thread the body finished.

#include <atomic>
#include <cassert>
#include <coroutine>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/frame_allocator.h"
#include "cyan/dispatch/detail/outcome.h"

namespace cyan::dispatch {

template <typename T>
class task;

namespace detail {

/// The result-type-independent part: laziness, the continuation and the rendezvous with it.
class task_promise_base;

/// The task whose start() runs on this thread, innermost (see case 1 above).
inline thread_local const task_promise_base* starting_task = nullptr;

class task_promise_base : public branch_member, public frame_allocated {
 public:
  /// Resumes the awaiter if it suspended before the body finished (see the file comment).
  struct final_awaiter {
    [[nodiscard]] bool await_ready() const noexcept { return false; }
    template <typename Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> finished) noexcept {
      task_promise_base& promise = finished.promise();
      if (starting_task == &promise) {
        promise.finished_inline_ = true;  // start() goes on with the awaiter
        return std::noop_coroutine();
      }
      if (promise.arrive()) {
        const executor_ref home = promise.awaiter_home_;
        if (!home || home == current_executor()) {
          return promise.continuation_;
        }
        // The awaiter is in the same branch as this body.
        home.vtable->resume_later(home.target, unique_function<void()>(resume_job(
                                                   promise.continuation_, promise.branch_)));
      }
      return std::noop_coroutine();  // the awaiter is still in start() and goes on by itself
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() const noexcept { return {}; }
  final_awaiter final_suspend() const noexcept { return {}; }

  /// Whether a co_await has started this task already (it may be running, suspended or done).
  [[nodiscard]] bool started() const noexcept { return static_cast<bool>(continuation_); }

  /// Runs the body for `awaiting` until it finishes or suspends. Returns whether `awaiting` must
  /// suspend (the body's end will resume it) rather than go on at once. Called once, by the
  /// awaiter's await_suspend; touches nothing after the rendezvous, since from then on another
  /// thread may resume `awaiting` and destroy this frame. `owner` is the awaiter's branch when
  /// it is one of cyan's coroutines (the body joins it and is resumed on its home), else null.
  [[nodiscard]] bool start(std::coroutine_handle<> self, std::coroutine_handle<> awaiting,
                           branch* owner, bool cyan_awaiter) noexcept {
    assert(!started() && awaiting);
    continuation_ = awaiting;
    branch_ = owner;
    const task_promise_base* outer = std::exchange(starting_task, this);
    self.resume();
    starting_task = outer;
    if (finished_inline_) {
      return false;
    }
    // Still on the awaiter's thread. Read by the body's end only if it arrives second, which
    // the exchange in arrive() orders after this write.
    if (cyan_awaiter) {
      awaiter_home_ = current_executor();
    }
    return !arrive();
  }

 private:
  // Returns whether the other side (the body's end, or the awaiter back from start()'s call)
  // arrived first, which makes this side the one to go on with the awaiter.
  bool arrive() noexcept {
    // acq_rel: pairs with the other side's exchange here; the second side to arrive acquires
    // what the first released (the body's result when the awaiter goes on, the awaiter's writes
    // when the body's end resumes it).
    return handoff_.exchange(true, std::memory_order_acq_rel);
  }

  std::coroutine_handle<> continuation_;  // written once by start(), before the body runs
  executor_ref awaiter_home_;  // written by start() if the body suspended; null: foreign awaiter
  // Set by the first side to arrive: start() once the body returns to it, or the body's end.
  std::atomic<bool> handoff_{ false };
  // Set by the body's end when it runs inside start()'s call (case 1); read by start().
  bool finished_inline_ = false;
};

/// The promise of task<T> for an object type T: the result is constructed in the frame and
/// moved out by take().
template <typename T>
class task_promise : public task_promise_base {
 public:
  task<T> get_return_object() noexcept;

  template <typename U = T>
  requires std::is_constructible_v<T, U&&>
  void return_value(U&& value) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    result_.set_value(std::forward<U>(value));
  }
  void unhandled_exception() noexcept { result_.set_error(std::current_exception()); }

  /// The result (moved out) or the body's exception (rethrown). Called once, after the end.
  T take() { return result_.take(); }

 private:
  outcome<T> result_;
};

/// The promise of task<T&>: the result is the address of the object the body returned.
template <typename T>
class task_promise<T&> : public task_promise_base {
 public:
  task<T&> get_return_object() noexcept;

  void return_value(T& value) noexcept { result_.set_value(value); }
  void unhandled_exception() noexcept { result_.set_error(std::current_exception()); }

  T& take() { return result_.take(); }

 private:
  outcome<T&> result_;
};

/// The promise of task<void>: only an exception to hand over.
template <>
class task_promise<void> : public task_promise_base {
 public:
  task<void> get_return_object() noexcept;

  void return_void() const noexcept {}
  void unhandled_exception() noexcept { result_.set_error(std::current_exception()); }

  void take() { result_.take(); }

 private:
  outcome<void> result_;
};

}  // namespace detail
}  // namespace cyan::dispatch
