#pragma once

#include <condition_variable>
#include <coroutine>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

#include "cyan/dispatch/detail/outcome.h"
#include "cyan/dispatch/task.h"

namespace cyan::test {

namespace sync_wait_detail {

// Set once by the thread that finishes the driver; waited for by the thread in sync_wait().
// The flag is set and signalled under the mutex, so once the waiter sees it the setter no
// longer touches this object (which lives on the waiter's stack).
class completion {
 public:
  void signal() {
    const std::lock_guard lock(mutex_);
    done_ = true;
    ready_.notify_one();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [this] { return done_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  bool done_ = false;
};

// A lazy coroutine that awaits the task and, at its end, signals the completion it was run with.
class driver {
 public:
  struct promise_type {
    struct signal_at_end {
      [[nodiscard]] bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> finished) noexcept {
        finished.promise().done->signal();  // last access: the waiter may free the frame now
      }
      void await_resume() const noexcept {}
    };

    driver get_return_object() noexcept {
      return driver(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    signal_at_end final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // the body catches all

    completion* done = nullptr;
  };

  driver(const driver&) = delete;
  driver& operator=(const driver&) = delete;
  ~driver() { coroutine_.destroy(); }

  // Runs the body on this thread until it finishes or suspends, then waits for its end.
  void run_to_end() {
    completion done;
    coroutine_.promise().done = &done;
    coroutine_.resume();
    done.wait();
  }

 private:
  explicit driver(std::coroutine_handle<promise_type> coroutine) noexcept : coroutine_(coroutine) {}

  std::coroutine_handle<promise_type> coroutine_;
};

template <typename T>
driver drive(cyan::dispatch::task<T> task, cyan::dispatch::detail::outcome<T>& result) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(task);
      result.set_value();
    } else {
      result.set_value(co_await std::move(task));
    }
  } catch (...) {
    result.set_error(std::current_exception());
  }
}

}  // namespace sync_wait_detail

/// Starts `task` on this thread and blocks until it has finished, wherever it was resumed; returns
/// its result or rethrows its exception (std::logic_error for an empty task). The task's frame is
/// destroyed before this returns. For tests: a program drives its tasks with co_await.
template <typename T>
T sync_wait(cyan::dispatch::task<T> task) {
  cyan::dispatch::detail::outcome<T> result;
  sync_wait_detail::drive(std::move(task), result).run_to_end();
  return result.take();
}

}  // namespace cyan::test
