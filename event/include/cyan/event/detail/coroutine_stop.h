#pragma once

// How an awaiter of this layer (signal_set::wait()) learns the stop token of the coroutine that
// awaits it without knowing its promise type: the primary template knows none; dispatch/
// specialises it for its own coroutines (dispatch/detail/coro_env.h), whose branch carries the
// token their suspending operations observe.

#include <coroutine>
#include <stop_token>
#include <type_traits>

namespace cyan::event::detail {

template <typename Promise, typename = void>
struct coroutine_stop {
  static std::stop_token of(Promise& /*promise*/) noexcept { return {}; }
};

/// The stop token of the coroutine `suspended` (none for coroutines that have none).
template <typename Promise>
[[nodiscard]] std::stop_token coroutine_stop_token(
    std::coroutine_handle<Promise> suspended) noexcept {
  if constexpr (std::is_void_v<Promise>) {
    return {};
  } else {
    return coroutine_stop<Promise>::of(suspended.promise());
  }
}

}  // namespace cyan::event::detail
