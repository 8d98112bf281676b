#pragma once

#include "cyan/dispatch/detail/schedule_awaiter.h"
#include "cyan/dispatch/detail/spawn_registry.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/thread_pool.h"

namespace cyan::dispatch {

/// `co_await schedule(executor)` moves the calling cyan::dispatch::task to `executor` (a
/// handler_thread, or any worker of a thread_pool): the task is queued there like a post and
/// goes on when its turn comes, and `executor` is its home from then on: after any later
/// suspension it resumes there (see task). This is the one way a task changes threads.
///
/// The executor accepts the task while it drains (a stop(drain) waits for tasks spawned on it).
/// Once it has finished, the hop cannot happen: a spawned task is then destroyed (its future
/// reports task_cancelled), and a coroutine that was not spawned goes on on the calling thread.
/// A task whose stop was requested does not move: the co_await throws
/// std::system_error(std::errc::operation_canceled). Never throws otherwise.
[[nodiscard]] inline detail::schedule_awaiter schedule(handler_thread& executor) noexcept {
  return executor.schedule();
}

/// schedule() onto one of `executor`'s workers.
[[nodiscard]] inline detail::schedule_awaiter schedule(thread_pool& executor) noexcept {
  return executor.schedule();
}

/// `co_await yield()` puts the calling coroutine at the back of its thread's queue (a handler
/// thread's inbox, or its pool's queue) and goes on when its turn comes, on that thread (or
/// pool). On a thread that is no executor's it goes on at once. Cancelled like schedule().
[[nodiscard]] inline detail::schedule_awaiter yield() noexcept {
  return detail::schedule_awaiter(detail::current_executor());
}

}  // namespace cyan::dispatch
