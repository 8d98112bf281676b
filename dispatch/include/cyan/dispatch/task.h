#pragma once

#include <coroutine>
#include <stdexcept>
#include <utility>

#include "cyan/dispatch/detail/task_promise.h"

namespace cyan::dispatch {

/// A coroutine that produces a T (`task<>` produces nothing, `task<T&>` a reference): write a
/// function returning `task<T>` and use `co_await` / `co_return` in it.
///
/// A task is lazy: calling the function only creates its frame (holding its parameters); the body
/// starts when the task is co_awaited (or spawned with co_spawn), on the awaiting thread.
///
/// Affinity: a task resumes on the thread it suspended on — its home: that handler thread, or
/// any worker of the thread_pool it runs on — whatever thread completes what it awaits (a
/// future, a sleep, a child task that moved elsewhere); the resumption is then one post to the
/// home. It changes threads only by `co_await schedule(executor)`, which makes that executor
/// its home. A task awaited by a foreign coroutine, or running on a thread that is no executor's,
/// goes on on whatever thread resumes it. A body that finishes without suspending returns to its
/// awaiter without any resumption, so awaiting any number of such tasks one after another uses
/// no extra stack, whatever the compiler's optimization or sanitizer flags.
///
/// Cancellation: a task awaited by a cyan task inherits its stop token (see this_task.h).
///
/// A task is move-only and used by one thread at a time. Destroying it destroys its frame and
/// every local in it, whether the body never started, is suspended (the thing it awaits must then
/// not resume it: `co_await` on a cyan::dispatch::future withdraws its continuation when the frame
/// is destroyed, wherever the future lives) or has finished; it must not be destroyed while its
/// body is running.
///
/// Parameters: the frame keeps copies of by-value parameters, but only the references of
/// reference parameters, so take parameters by value unless the caller provably outlives the task.
/// A lambda that is itself a coroutine (`[x]() -> task<> { ... }`) keeps its captures in the
/// lambda object, not in the frame: they die with the lambda, which is usually before the task
/// runs. Pass what the body needs as parameters instead (`[](int x) -> task<> { ... }(x)`), or
/// hand the lambda itself to co_spawn, which keeps it until the task has finished.
template <typename T = void>
class [[nodiscard]] task {
 public:
  using promise_type = detail::task_promise<T>;
  using value_type = T;

  /// An empty task (not valid()), to be assigned one later.
  task() noexcept = default;
  task(task&& other) noexcept : coroutine_(std::exchange(other.coroutine_, nullptr)) {}
  task& operator=(task&& other) noexcept {
    task(std::move(other)).swap(*this);
    return *this;
  }
  /// Destroys the frame, wherever the body is (see the class comment).
  ~task() {
    if (coroutine_) {
      coroutine_.destroy();
    }
  }

  /// True when this task refers to a coroutine (false when default-constructed or moved from).
  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(coroutine_); }

  /// True when the body has finished (returned or thrown); false before, and when not valid().
  [[nodiscard]] bool is_ready() const noexcept { return coroutine_ && coroutine_.done(); }

  /// `co_await task` starts the body and suspends the awaiting coroutine until the body has
  /// finished; the expression yields the body's result (moved out) or rethrows its exception.
  /// A task may be co_awaited once. Throws std::logic_error when it is not valid() or was
  /// co_awaited before.
  auto operator co_await() & { return awaiter{ checked() }; }
  auto operator co_await() && { return awaiter{ checked() }; }

  void swap(task& other) noexcept { std::swap(coroutine_, other.coroutine_); }

 private:
  friend promise_type;
  using handle_type = std::coroutine_handle<promise_type>;

  struct awaiter {
    handle_type coroutine;

    [[nodiscard]] bool await_ready() const noexcept { return false; }
    template <typename Promise>
    bool await_suspend(std::coroutine_handle<Promise> awaiting) noexcept {
      return coroutine.promise().start(coroutine, awaiting, detail::branch_of(awaiting),
                                       detail::wants_home<Promise>);
    }
    T await_resume() { return coroutine.promise().take(); }
  };

  explicit task(handle_type coroutine) noexcept : coroutine_(coroutine) {}

  handle_type checked() const {
    if (!coroutine_ || coroutine_.promise().started()) [[unlikely]] {
      throw_unawaitable(static_cast<bool>(coroutine_));
    }
    return coroutine_;
  }

  [[noreturn, gnu::cold, gnu::noinline]] static void throw_unawaitable(bool valid) {
    throw std::logic_error(valid ? "cyan::dispatch::task: co_await on a task awaited before"
                                 : "cyan::dispatch::task: co_await on an empty task");
  }

  handle_type coroutine_;
};

template <typename T>
void swap(task<T>& a, task<T>& b) noexcept {
  a.swap(b);
}

namespace detail {

template <typename T>
task<T> task_promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<task_promise>::from_promise(*this));
}

template <typename T>
task<T&> task_promise<T&>::get_return_object() noexcept {
  return task<T&>(std::coroutine_handle<task_promise>::from_promise(*this));
}

inline task<void> task_promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<task_promise>::from_promise(*this));
}

}  // namespace detail
}  // namespace cyan::dispatch
