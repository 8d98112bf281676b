#pragma once

#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <functional>
#include <mutex>
#include <stop_token>
#include <utility>
#include <vector>

#include "cyan/common/noncopyable.h"
#include "cyan/dispatch/co_spawn.h"
#include "cyan/dispatch/detail/coro_env.h"

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

  void leave() noexcept;
  // Registers a join() waiter unless the scope is empty; returns whether it must suspend.
  bool wait(std::coroutine_handle<> coroutine, detail::executor_ref home, detail::branch* owner);

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

}  // namespace cyan::dispatch
