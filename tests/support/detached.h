#pragma once

#include <coroutine>
#include <exception>

namespace cyan::test {

/// The smallest eager, fire-and-forget coroutine type: it runs at once until its first
/// suspension and frees itself at its end. For tests of co_await.
struct detached {
  struct promise_type {
    detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

}  // namespace cyan::test
