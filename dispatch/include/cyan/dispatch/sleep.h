#pragma once

#include <chrono>

#include "cyan/common/detail/saturating_time.h"
#include "cyan/dispatch/detail/sleep_awaiter.h"

namespace cyan::dispatch {

/// `co_await sleep_until(t)` suspends the calling coroutine until `t` (never earlier).
///
/// On a handler thread or pool worker it waits on that thread's loop, in a timer wheel of 1 ms
/// ticks (so it ends on the first tick at or after `t`: up to about 1 ms late on an idle
/// thread), without blocking the thread and without allocating once the wheel has grown;
/// 100,000 sleepers on one thread cost one loop timer. The task resumes on that thread (or any
/// worker of that pool). Elsewhere (a thread that is no executor's) it waits on the global
/// pool's timer and resumes on a global pool worker.
///
/// In a cyan::dispatch::task whose stop is requested (before or during the sleep), it resumes at
/// once, on its own thread, with std::system_error(std::errc::operation_canceled). When the
/// thread it sleeps on finishes first (a task that moved there with schedule(): its spawn
/// executor's stop(drain) does not wait for that thread), the task is destroyed unresumed with
/// the thread's end, and its spawn reports task_cancelled.
/// Throws std::bad_alloc when the wheel cannot grow.
inline detail::sleep_awaiter sleep_until(std::chrono::steady_clock::time_point deadline) noexcept {
  return detail::sleep_awaiter(deadline);
}

/// `co_await sleep_for(d)`: sleep_until(now + d). A duration of zero or less does not suspend.
template <typename Rep, typename Period>
detail::sleep_awaiter sleep_for(std::chrono::duration<Rep, Period> duration) noexcept {
  using clock = std::chrono::steady_clock;
  const auto now = clock::now();
  if (duration <= duration.zero()) {
    return detail::sleep_awaiter(now);
  }
  return detail::sleep_awaiter(cyan::detail::saturating_add(now, duration), now);
}

}  // namespace cyan::dispatch
