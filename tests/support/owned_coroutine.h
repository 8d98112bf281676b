#pragma once

#include <coroutine>
#include <exception>
#include <utility>

namespace cyan::test {

/// An eager coroutine type whose frame the test owns: it runs at once until its first
/// suspension, stops at its end without freeing itself, and is freed by destroy() or by the
/// destructor, whichever comes first. For tests that destroy a coroutine while it is suspended.
class owned_coroutine {
 public:
  struct promise_type {
    owned_coroutine get_return_object() noexcept {
      return owned_coroutine(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };

  owned_coroutine(owned_coroutine&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)) {}
  owned_coroutine& operator=(owned_coroutine&&) = delete;
  ~owned_coroutine() { destroy(); }

  /// The frame, for a test that registers it somewhere by hand.
  [[nodiscard]] std::coroutine_handle<> handle() const noexcept { return handle_; }
  /// Whether it ran to its end.
  [[nodiscard]] bool done() const noexcept { return handle_.done(); }
  /// Frees the frame (and what lives in it) wherever it is suspended.
  void destroy() noexcept {
    if (handle_) {
      std::exchange(handle_, nullptr).destroy();
    }
  }

 private:
  explicit owned_coroutine(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}

  std::coroutine_handle<promise_type> handle_;
};

}  // namespace cyan::test
