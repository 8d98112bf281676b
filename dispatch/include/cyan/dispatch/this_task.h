#pragma once

#include <coroutine>
#include <stop_token>

#include "cyan/dispatch/detail/coro_env.h"

namespace cyan::dispatch::this_task {

namespace detail {

/// What stop_token() returns: never suspends, yields the calling task's token.
class [[nodiscard]] stop_token_awaiter {
 public:
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> calling) noexcept {
    static_assert(dispatch::detail::is_cyan_promise<Promise>,
                  "cyan::dispatch::this_task::stop_token() is for cyan::dispatch::task bodies");
    if (const dispatch::detail::branch* owner = calling.promise().branch_; owner != nullptr) {
      token_ = owner->token;
    }
    return false;
  }
  [[nodiscard]] std::stop_token await_resume() noexcept { return std::move(token_); }

 private:
  std::stop_token token_;
};

}  // namespace detail

/// `co_await this_task::stop_token()` in a cyan::dispatch::task yields the task's stop token:
/// the one co_spawn gave it (stopped by the token passed to co_spawn, by a stop(discard) of its
/// executor, by an async_scope's request_stop()), inherited by every task it awaits; for a
/// when_any child, one that when_any also stops. A task that was not spawned (awaited only by
/// foreign coroutines) gets a token that never stops. Does not suspend; never throws.
[[nodiscard]] inline detail::stop_token_awaiter stop_token() noexcept {
  return {};
}

}  // namespace cyan::dispatch::this_task
