#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <stop_token>
#include <system_error>
#include <type_traits>

#include "cyan/dispatch/detail/forward_stop.h"
#include "cyan/dispatch/detail/join_state.h"
#include "cyan/dispatch/schedule.h"
#include "cyan/dispatch/sleep.h"
#include "cyan/dispatch/task.h"

namespace cyan::dispatch {

namespace detail {

/// with_timeout()'s clock: sleeps `limit` unless stopped first, then lets the thread's queue
/// turn once, so that a task whose own wait ends in the same timer tick (it completes exactly
/// at the deadline) finishes before the clock stops it.
template <typename Rep, typename Period>
task<> timeout_timer(std::chrono::duration<Rep, Period> limit) {
  co_await sleep_for(limit);
  co_await yield();
}

}  // namespace detail

/// Runs `work` with a time limit: `co_await with_timeout(read_request(socket), 5s)`.
///
/// If `work` has not finished when `limit` has passed, its stop is requested (its stop token,
/// which also follows the awaiting task's) and with_timeout waits for it to end, so nothing
/// outlives the call; then it throws std::system_error(std::errc::timed_out) — unless `work`
/// finished with a value all the same (it completed at the deadline, or while being
/// cancelled), in which case that value is returned: a result is never thrown away. If `work`
/// finishes in time, its value is returned or its exception rethrown, and the clock is stopped.
/// A stop request of the awaiting task reaches `work`, whose outcome (typically
/// operation_canceled) is then the result. The clock is sleep_for()'s (1 ms ticks on a handler
/// thread, see there). Throws std::logic_error for an empty task, std::bad_alloc.
template <typename T, typename Rep, typename Period>
task<T> with_timeout(task<T> work, std::chrono::duration<Rep, Period> limit) {
  detail::branch* parent = co_await detail::branch_reader{};
  std::stop_source stop_children;
  std::optional<detail::stop_forwarder> follow_parent;
  if (parent != nullptr && parent->token.stop_possible()) {
    follow_parent.emplace(parent->token, detail::forward_stop{ &stop_children });
  }
  // Whichever child ends first stops the other: the clock stops the work, the work the clock.
  detail::join_state join(2);
  join.stop_others_with(&stop_children);
  detail::outcome<T> result;
  detail::outcome<void> expired;
  task<> clock = detail::timeout_timer(limit);
  std::array<detail::child_branch, 2> branches;
  detail::prepare_child(join, 0, work, result, branches[0], stop_children.get_token(), parent);
  detail::prepare_child(join, 1, clock, expired, branches[1], stop_children.get_token(), parent);
  co_await detail::join_awaiter(join);
  // The clock ran out (it was not stopped) and the work did not leave a value: a timeout.
  if (join.winner() == 1 && !expired.has_error() && result.has_error()) {
    throw std::system_error(std::make_error_code(std::errc::timed_out),
                            "cyan::dispatch::with_timeout: the task did not finish in time");
  }
  if constexpr (std::is_void_v<T>) {
    result.take();
  } else {
    co_return result.take();
  }
}

}  // namespace cyan::dispatch
