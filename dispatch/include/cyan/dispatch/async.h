#pragma once

#include <chrono>
#include <concepts>
#include <type_traits>
#include <utility>

#include "cyan/dispatch/future.h"
#include "cyan/dispatch/serial_token.h"
#include "cyan/dispatch/thread_pool.h"

namespace cyan::dispatch {

/// The process-wide pool behind async() and async_awaitable(): thread_pool::default_size()
/// workers named "cyan-global-<n>", created on first use. When the program exits (return from
/// main, or exit()), the pool is drained — everything already posted runs — and its workers are
/// joined; posts after that throw executor_stopped. The pool itself is never destroyed, so code
/// running during static destruction still finds it (and is refused rather than crashing).
/// After fork() the child's first call makes a pool of its own: the parent's workers are not in
/// the child, so their pool is forgotten there (never used, drained or joined). [any thread]
thread_pool& global_concurrent_pool();

/// Runs `f()` on the global pool. What it throws goes to the pool's error callback (stderr by
/// default). Throws executor_stopped after exit began, std::bad_alloc.
template <typename F>
requires std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>>
void async(F&& f) {
  global_concurrent_pool().post(std::forward<F>(f));
}

/// Runs `f()` on the global pool after every earlier task of `token` finished, and before any
/// later one starts. Throws like async(f).
template <typename F>
requires std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>>
void async(const serial_token& token, F&& f) {
  global_concurrent_pool().post(token, std::forward<F>(f));
}

/// Runs `f()` on the global pool once `delay` has passed (cancelled if the program exits
/// first). Throws like async(f).
template <typename F, typename Rep, typename Period>
requires std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>>
void async(F&& f, std::chrono::duration<Rep, Period> delay) {
  global_concurrent_pool().post(std::forward<F>(f), delay);
}

/// Runs `f()` on the global pool and returns the future of its result (or of what it threw).
/// One block from the frame pool (no malloc once warmed up). Throws like async(f).
template <typename F>
requires std::invocable<std::decay_t<F>>
[[nodiscard]] auto async_awaitable(F&& f) -> future<detail::task_result_t<F>> {
  return global_concurrent_pool().post_awaitable(std::forward<F>(f));
}

/// async_awaitable() in `token`'s order (see async(token, f)).
template <typename F>
requires std::invocable<std::decay_t<F>>
[[nodiscard]] auto async_awaitable(const serial_token& token, F&& f)
    -> future<detail::task_result_t<F>> {
  return global_concurrent_pool().post_awaitable(token, std::forward<F>(f));
}

/// async_awaitable() once `delay` has passed; task_cancelled if the program exits first.
template <typename F, typename Rep, typename Period>
requires std::invocable<std::decay_t<F>>
[[nodiscard]] auto async_awaitable(F&& f, std::chrono::duration<Rep, Period> delay)
    -> future<detail::task_result_t<F>> {
  return global_concurrent_pool().post_awaitable(std::forward<F>(f), delay);
}

}  // namespace cyan::dispatch
