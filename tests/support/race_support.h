#pragma once

// The race every waiting primitive of cyan::dispatch must decide (sync_test, channel_test): a
// waiter's stop request against the hand-off that would wake it.

#include <system_error>
#include <utility>

#include "cyan/dispatch/co_spawn.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/task.h"
#include "support/stop_support.h"

namespace cyan::test {

/// Returns once `h` has run everything posted to it before: a task spawned there earlier has run
/// to its first suspension (it is waiting) by then.
inline void settle(cyan::dispatch::handler_thread& h) {
  cyan::dispatch::co_spawn(h, []() -> cyan::dispatch::task<> { co_return; }).get();
}

/// co_awaits `wait()` (a task<>): true when it completed, false when it ended with
/// operation_canceled (anything else is rethrown).
template <typename Wait>
cyan::dispatch::task<bool> completed_unless_cancelled(Wait wait) {
  try {
    co_await wait();
    co_return true;
  } catch (const std::system_error& e) {
    if (!is_canceled(e)) {
      throw;
    }
  }
  co_return false;
}

/// One round: a task on `waiter` runs `wait()` (a task<> that waits on the primitive) with a
/// stop token; on even rounds it is waiting before the race starts (odd rounds: maybe not yet).
/// Then `grant()` (a task<> that hands the primitive over) runs on `granter` while this thread
/// requests the waiter's stop. Returns whether the wait completed (false: cancelled).
template <typename Wait, typename Grant>
bool race_stop_against_grant(cyan::dispatch::handler_thread& waiter,
                             cyan::dispatch::handler_thread& granter, int round, Wait wait,
                             Grant grant) {
  std::stop_source stop;
  auto waited = cyan::dispatch::co_spawn(
      waiter, [&wait] { return completed_unless_cancelled(std::move(wait)); }, stop.get_token());
  if (round % 2 == 0) {
    settle(waiter);
  }
  auto granted = cyan::dispatch::co_spawn(granter, std::move(grant));
  stop.request_stop();
  granted.get();
  return waited.get();
}

}  // namespace cyan::test
