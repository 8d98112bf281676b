#pragma once

#include <atomic>
#include <coroutine>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/frame_allocator.h"

namespace cyan::dispatch {

template <typename T>
class async_generator;

namespace detail {

/// The generator whose next() runs its body on this thread, innermost (see generator_promise).
inline thread_local const void* resuming_generator = nullptr;

}  // namespace detail

/// A coroutine that produces a sequence of T: write a function returning async_generator<T>
/// that `co_yield`s values and may `co_await` anything between them (tasks, sleeps, sockets,
/// channels); its consumer, a coroutine, calls `co_await gen.next()` for each value.
///
/// Lazy: nothing runs before the first next(). Each next() runs the body, on the consumer's
/// thread, until its next co_yield (yielding that value), its end (std::nullopt) or an exception
/// (rethrown by that next(); later calls yield std::nullopt). The body runs in the consumer's
/// task: it inherits its stop token and its home (after a suspension it resumes there, and the
/// consumer resumes there too). A body that yields without suspending hands over its value
/// without any resumption, so a loop over a million synchronously yielded values uses constant
/// stack. Values are moved out of the generator into next()'s result.
///
/// Move-only; one next() at a time. Destroying the generator destroys its frame and the locals
/// in it, wherever the body is suspended (at a co_yield, or before it started); it must not be
/// destroyed while a next() is pending.
template <typename T>
class [[nodiscard]] async_generator {
  static_assert(!std::is_reference_v<T> && !std::is_void_v<T>,
                "cyan::dispatch::async_generator yields values");

 public:
  class promise_type : public detail::branch_member, public detail::frame_allocated {
   public:
    async_generator get_return_object() noexcept {
      return async_generator(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }

    // A co_yield (and the end): hands the value (or the end) to the consumer's next().
    struct yield_awaiter {
      [[nodiscard]] bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> self) noexcept {
        promise_type& promise = self.promise();
        if (detail::resuming_generator == &promise) {
          promise.yielded_inline_ = true;  // next() goes on with the consumer
          return std::noop_coroutine();
        }
        if (promise.arrive()) {
          const detail::executor_ref home = promise.consumer_home_;
          if (!home || home == detail::current_executor()) {
            return promise.consumer_;
          }
          detail::resume_on(home, promise.consumer_, promise.branch_);
        }
        return std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };

    template <typename U = T>
    requires std::is_constructible_v<T, U&&> yield_awaiter yield_value(U&& value)
    noexcept(std::is_nothrow_constructible_v<T, U&&>) {
      value_.emplace(std::forward<U>(value));
      return {};
    }
    yield_awaiter final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() noexcept { error_ = std::current_exception(); }

   private:
    friend class async_generator;

    // Runs the body for `consumer` until it yields, ends or suspends; returns whether the
    // consumer must suspend (the yield will resume it) rather than go on at once.
    bool resume_for(std::coroutine_handle<promise_type> self, std::coroutine_handle<> consumer,
                    detail::branch* owner, bool wants_home) noexcept {
      consumer_ = consumer;
      branch_ = owner;
      consumer_home_ = {};
      yielded_inline_ = false;
      handoff_.store(false, std::memory_order_relaxed);
      const void* outer = std::exchange(detail::resuming_generator, this);
      self.resume();
      detail::resuming_generator = outer;
      if (yielded_inline_) {
        return false;
      }
      if (wants_home) {
        consumer_home_ = detail::current_executor();
      }
      return !arrive();
    }

    // acq_rel: the second to arrive (next()'s caller or the yield) acquires what the first
    // released.
    bool arrive() noexcept { return handoff_.exchange(true, std::memory_order_acq_rel); }

    std::optional<T> value_;
    std::exception_ptr error_;
    std::coroutine_handle<> consumer_;
    detail::executor_ref consumer_home_;
    std::atomic<bool> handoff_{ false };
    bool yielded_inline_ = false;
  };

  async_generator() noexcept = default;
  async_generator(async_generator&& other) noexcept
      : coroutine_(std::exchange(other.coroutine_, nullptr)) {}
  async_generator& operator=(async_generator&& other) noexcept {
    async_generator(std::move(other)).swap(*this);
    return *this;
  }
  ~async_generator() {
    if (coroutine_) {
      coroutine_.destroy();
    }
  }
  void swap(async_generator& other) noexcept { std::swap(coroutine_, other.coroutine_); }

  /// `co_await gen.next()` runs the body to its next value: that value, or std::nullopt once
  /// the body has ended; rethrows the body's exception (once). Throws std::logic_error on an
  /// empty generator.
  [[nodiscard]] auto next() {
    if (!coroutine_) {
      throw std::logic_error("cyan::dispatch::async_generator: next() on an empty generator");
    }
    return next_awaiter{ coroutine_ };
  }

 private:
  using handle_type = std::coroutine_handle<promise_type>;

  struct next_awaiter {
    handle_type coroutine;

    [[nodiscard]] bool await_ready() const noexcept { return coroutine.done(); }
    template <typename Promise>
    bool await_suspend(std::coroutine_handle<Promise> consumer) noexcept {
      return coroutine.promise().resume_for(coroutine, consumer, detail::branch_of(consumer),
                                            detail::wants_home<Promise>);
    }
    std::optional<T> await_resume() {
      promise_type& promise = coroutine.promise();
      if (promise.error_) {
        std::rethrow_exception(std::exchange(promise.error_, nullptr));
      }
      std::optional<T> value = std::move(promise.value_);
      promise.value_.reset();
      return value;
    }
  };

  explicit async_generator(handle_type coroutine) noexcept : coroutine_(coroutine) {}

  handle_type coroutine_;
};

}  // namespace cyan::dispatch
