#pragma once

// The race every waiting primitive of cyan::dispatch must decide (sync_test, channel_test): a
// waiter's stop request against the hand-off that would wake it.

#include <atomic>
#include <system_error>
#include <thread>
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
/// stop token; `grant()` (a task<> that hands the primitive over) runs on `granter` while this
/// thread requests the waiter's stop. Rounds 0, 4, 8, ...: the waiter is waiting before the race
/// starts; rounds 1, 3, 5, ...: it may not be yet; rounds 2, 6, 10, ...: no race but the order
/// the rule is about — the grant comes first (the waiter's thread is held busy, so the waiter
/// cannot resume yet), then the stop request, then the waiter resumes: it must have completed.
/// Returns whether the wait completed (false: cancelled).
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
  if (round % 4 == 2) {
    std::atomic<bool> released{ false };
    auto held = cyan::dispatch::co_spawn(waiter, [&released]() -> cyan::dispatch::task<> {
      while (!released.load()) {  // bounded by this round: released below
        std::this_thread::yield();
      }
      co_return;
    });
    cyan::dispatch::co_spawn(granter, std::move(grant)).get();
    stop.request_stop();  // after the grant: it must not undo it
    released.store(true);
    held.get();
    return waited.get();
  }
  auto granted = cyan::dispatch::co_spawn(granter, std::move(grant));
  stop.request_stop();
  granted.get();
  return waited.get();
}

}  // namespace cyan::test
