#pragma once

#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <utility>
#include <vector>

#include "cyan/common/noncopyable.h"
#include "cyan/dispatch/co_spawn.h"
#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/sleep.h"
#include "cyan/dispatch/task.h"
#include "cyan/dispatch/when_all.h"

namespace cyan::dispatch {

/// A set of spawned tasks to stop and wait for together: what a server uses for a graceful
/// shutdown (stop accepting, request_stop(), join()).
///
/// spawn() starts a child with co_spawn(executor, t, token, detached), where `token` is the
/// scope's stop token: what a child throws goes to its executor's error path, and
/// request_stop() asks every child to stop (each sees it at its suspension points as
/// operation_canceled). A child counts from spawn() until it has finished and its state (the
/// task's frames, a callable's captures) is destroyed, also when its executor cancels or
/// destroys it.
///
/// Thread safety: every member is [any thread]; join() and join_blocking() may be waited on
/// by several at once.
class async_scope : noncopyable {
 public:
  async_scope() = default;
  /// With live children: request_stop(), then waits for them (as join_blocking() does, but
  /// on any thread: on a loop thread that the children need in order to finish, that waits
  /// forever, so join() such a scope before it is destroyed there).
  ~async_scope();

  /// Starts `t` (a task, or a callable returning one, as for co_spawn) on `executor` (a
  /// handler_thread or thread_pool) as a child of this scope. Throws std::bad_alloc; on a
  /// stopped executor the child is destroyed unrun (and counted out) without an exception.
  template <typename Executor, typename X>
  requires(std::same_as<Executor, handler_thread> || std::same_as<Executor, thread_pool>) &&
      detail::spawnable<X> void spawn(Executor& executor, X&& t) {
    ticket counted(*this);
    if constexpr (detail::is_task<std::remove_cvref_t<X>>) {
      co_spawn(
          executor,
          [counted = std::move(counted), child = std::forward<X>(t)]() mutable {
            return std::move(child);
          },
          source_.get_token(), detached);
    } else {
      co_spawn(
          executor,
          [counted = std::move(counted), make = std::forward<X>(t)]() mutable {
            return std::invoke(std::move(make));
          },
          source_.get_token(), detached);
    }
  }

  /// spawn() on the global pool.
  template <typename X>
  requires detail::spawnable<X>
  void spawn(X&& t) { spawn(global_concurrent_pool(), std::forward<X>(t)); }

  /// Asks every child, present and future, to stop. Never throws.
  void request_stop() noexcept { source_.request_stop(); }
  /// The token the children get.
  [[nodiscard]] std::stop_token get_stop_token() const noexcept { return source_.get_token(); }

  /// Children that have not finished.
  [[nodiscard]] std::size_t size() const;

  class join_awaiter;
  /// `co_await scope.join()` suspends until the scope has no child (at once if it has none),
  /// then resumes on the awaiting task's home. Children spawned while it waits are waited for
  /// too. It waits even when the awaiting task's stop is requested: stop the children instead.
  [[nodiscard]] join_awaiter join() noexcept;

  /// Blocks until the scope has no child. Throws std::logic_error on a handler thread or pool
  /// worker (whose loop the children may need: use co_await join() there).
  void join_blocking();

  /// `co_await scope.join_for(limit)` waits as join() does, but at most `limit`: true when the
  /// scope had no child left in time, false when `limit` passed first (the children go on: stop
  /// them, then join() again, which still works). Resumes on the awaiting task's home. A stop
  /// request for the awaiting task ends the wait at once with
  /// std::system_error(operation_canceled). Throws std::bad_alloc.
  template <typename Rep, typename Period>
  [[nodiscard]] task<bool> join_for(std::chrono::duration<Rep, Period> limit) {
    auto first = co_await when_any(join_or_stop(), sleep_task(limit));
    co_return first.index() == 0;
  }

  /// join_blocking() for at most `limit`: true when the scope had no child left in time.
  /// Throws std::logic_error on a handler thread or pool worker, as join_blocking() does.
  template <typename Rep, typename Period>
  [[nodiscard]] bool join_blocking_for(std::chrono::duration<Rep, Period> limit) {
    return join_blocking_until(std::chrono::steady_clock::now() +
                               std::chrono::ceil<std::chrono::steady_clock::duration>(limit));
  }

 private:
  // Counts one child while it lives (moved into the spawned callable).
  class ticket {
   public:
    explicit ticket(async_scope& scope);
    ticket(ticket&& other) noexcept : scope_(std::exchange(other.scope_, nullptr)) {}
    ticket& operator=(ticket&&) = delete;
    ~ticket();

   private:
    async_scope* scope_;
  };

  struct waiter {
    std::coroutine_handle<> coroutine;
    detail::executor_ref home;
    detail::branch* owner;
  };
  class stoppable_join_awaiter;

  void leave() noexcept;
  // Registers a join() waiter unless the scope is empty (or `refused`, read under the lock, is
  // set); returns whether it must suspend.
  bool wait(std::coroutine_handle<> coroutine, detail::executor_ref home, detail::branch* owner,
            const bool* refused = nullptr);
  // Takes `coroutine`'s waiter out, if it is still there; returns whether it was.
  bool withdraw(std::coroutine_handle<> coroutine) noexcept;
  bool join_blocking_until(std::chrono::steady_clock::time_point deadline);
  // join_for()'s two children: a join that a stop request ends (operation_canceled), a sleep.
  task<> join_or_stop();
  template <typename Rep, typename Period>
  static task<> sleep_task(std::chrono::duration<Rep, Period> limit) {
    co_await sleep_for(limit);
  }

  std::stop_source source_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;  // signalled when live_ drops to zero
  std::size_t live_ = 0;          // guarded by mutex_
  std::vector<waiter> waiting_;   // guarded by mutex_
};

class async_scope::join_awaiter {
 public:
  explicit join_awaiter(async_scope& scope) noexcept : scope_(scope) {}
  [[nodiscard]] bool await_ready() const { return scope_.size() == 0; }
  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) {
    return scope_.wait(
        suspended,
        detail::wants_home<Promise> ? detail::current_executor() : detail::executor_ref{},
        detail::branch_of(suspended));
  }
  void await_resume() const noexcept {}

 private:
  async_scope& scope_;
};

inline async_scope::join_awaiter async_scope::join() noexcept {
  return join_awaiter(*this);
}

// join() that a stop request of the awaiting branch ends: the stop callback takes the waiter
// out under the scope's lock and resumes it through its home's queue; when leave() took it
// first, leave() resumes it. The callback is in place before the waiter is registered (a stop
// that comes in between sets stopped_, which wait() reads under the lock), and await_suspend
// touches nothing after the registration, which may resume the coroutine at once elsewhere.
class async_scope::stoppable_join_awaiter {
 public:
  explicit stoppable_join_awaiter(async_scope& scope) noexcept : scope_(scope) {}
  stoppable_join_awaiter(const stoppable_join_awaiter&) = delete;
  stoppable_join_awaiter& operator=(const stoppable_join_awaiter&) = delete;
  ~stoppable_join_awaiter() {
    if (coroutine_) {
      (void)scope_.withdraw(coroutine_);  // the frame is destroyed while it waits
    }
  }

  [[nodiscard]] bool await_ready() const { return scope_.size() == 0; }
  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) {
    owner_ = detail::branch_of(suspended);
    home_ = detail::wants_home<Promise> ? detail::current_executor() : detail::executor_ref{};
    coroutine_ = suspended;
    if (owner_ != nullptr) {
      stop_.emplace(owner_->token, on_stop{ this });
    }
    return scope_.wait(suspended, home_, owner_, &stopped_);  // false: await_resume() at once
  }
  /// Throws std::system_error(operation_canceled) when a stop request ended the wait.
  void await_resume();

 private:
  struct on_stop {
    stoppable_join_awaiter* self;
    void operator()() const noexcept { self->stop_requested(); }
  };
  void stop_requested() noexcept;

  async_scope& scope_;
  std::coroutine_handle<> coroutine_;  // set while registered (or about to be)
  detail::executor_ref home_;
  detail::branch* owner_ = nullptr;
  bool stopped_ = false;  // guarded by the scope's mutex_
  std::optional<std::stop_callback<on_stop>> stop_;
};

}  // namespace cyan::dispatch
