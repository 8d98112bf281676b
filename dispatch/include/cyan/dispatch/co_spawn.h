#pragma once

#include <concepts>
#include <stop_token>
#include <utility>

#include "cyan/dispatch/async.h"
#include "cyan/dispatch/detail/spawn_state.h"
#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/future.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/task.h"
#include "cyan/dispatch/thread_pool.h"

namespace cyan::dispatch {

/// Tag for co_spawn(): fire and forget, no future (see co_spawn).
struct detached_t {
  explicit detached_t() = default;
};
/// Pass to co_spawn() to start a task without a future.
inline constexpr detached_t detached{};

/// Starts `t` on `executor` (a handler_thread or a thread_pool): the task's body begins in a
/// job posted there, goes on wherever it moves with schedule(), and its result (or exception)
/// completes the returned future, which can be get()-ed or co_awaited.
///
/// `t` is a task<T>, or a callable with no parameters that returns one; the callable (with its
/// captures) is moved into the spawn's state, invoked on the executor, and destroyed only after
/// the task finished, so `co_spawn(h, [conn = std::move(c)]() -> task<> { ... use conn ... })`
/// is safe. (A task made by calling such a lambda yourself, `co_spawn(h, lambda())`, keeps
/// no captures: they die with the lambda object. Pass the lambda, or parameters by value.)
///
/// The task gets its own stop token (this_task::stop_token()), which `token` (when given)
/// stops too, and which stop(discard) of the executor stops.
///
/// Stops: posted to an executor that is stopped already, the task is destroyed unrun and the
/// future reports task_cancelled (co_spawn itself does not throw executor_stopped). The
/// executor's stop(drain) waits until every task spawned on it has finished — including tasks
/// suspended on a timer, a future or a socket, however long they take (request their stop, e.g.
/// with an async_scope, to shorten that). stop(discard) requests every such task's stop and
/// destroys it, unrun beyond that point, at its next resumption: its frames are destroyed with
/// their locals, and its future reports task_cancelled. A task queued but not started is
/// destroyed the same way.
///
/// [any thread] Throws std::bad_alloc, and what moving `t` throws.
template <typename Executor, typename X>
requires(std::same_as<Executor, handler_thread> || std::same_as<Executor, thread_pool>) &&
    detail::spawnable<X> [[nodiscard]] auto co_spawn(Executor& executor, X&& t,
                                                     std::stop_token token = {}) {
  return detail::spawn(executor, std::forward<X>(t), std::move(token), false);
}

/// co_spawn() without a future: what the task throws goes to the executor's error path (the
/// handler's on_error() on a handler_thread, or stderr without a handler; the pool's error
/// callback, stderr by default). Never lost, never std::terminate. Not reported: the
/// std::system_error(operation_canceled) of a task whose stop was requested (that is how a
/// stopped task ends), and the cancellation of a task its executor discarded.
template <typename Executor, typename X>
requires(std::same_as<Executor, handler_thread> || std::same_as<Executor, thread_pool>) &&
    detail::spawnable<X> void co_spawn(Executor& executor, X&& t, detached_t) {
  (void)detail::spawn(executor, std::forward<X>(t), std::stop_token(), true);
}

/// co_spawn(executor, t, detached) with a stop token.
template <typename Executor, typename X>
requires(std::same_as<Executor, handler_thread> || std::same_as<Executor, thread_pool>) &&
    detail::spawnable<X> void co_spawn(Executor& executor, X&& t, std::stop_token token,
                                       detached_t) {
  (void)detail::spawn(executor, std::forward<X>(t), std::move(token), true);
}

/// co_spawn() on the global pool (global_concurrent_pool()).
template <typename X>
requires detail::spawnable<X>
[[nodiscard]] auto co_spawn(X&& t, std::stop_token token = {}) {
  return co_spawn(global_concurrent_pool(), std::forward<X>(t), std::move(token));
}

/// co_spawn(t, detached) on the global pool.
template <typename X>
requires detail::spawnable<X>
void co_spawn(X&& t, detached_t) {
  co_spawn(global_concurrent_pool(), std::forward<X>(t), detached);
}

}  // namespace cyan::dispatch
