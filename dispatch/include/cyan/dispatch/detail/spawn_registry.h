#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <stop_token>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/dispatch/detail/coro_env.h"

namespace cyan::dispatch {
class handler_thread;
class thread_pool;
}  // namespace cyan::dispatch

namespace cyan::dispatch::detail {

/// The tasks co_spawn started on one executor and that have not finished: a drain stop waits
/// for them, a discard stop abandons them (see "Branches" in coro_env.h). Counting is two
/// uncontended atomics per task; nothing is linked.
class spawn_registry : noncopyable {
 public:
  /// `on_empty(context)` runs whenever the count of live tasks drops to zero (on the thread that
  /// removed the last one). It must not throw.
  spawn_registry(void (*on_empty)(void*) noexcept, void* context) noexcept
      : on_empty_(on_empty), context_(context) {}
  /// Waits for a leave() that is still running (see leave()).
  ~spawn_registry();

  /// Counts a task; before the task is posted (see "Stop" in outstanding_work.h). [any thread]
  void enter() noexcept {
    // seq_cst: the count is read by the stop protocol after the stop flag (see "Stop" in
    // outstanding_work.h); the task is posted after this.
    live_.value.fetch_add(1, std::memory_order_seq_cst);
  }
  /// Counts a task out once it has finished or was destroyed. [any thread]
  void leave() noexcept;
  /// Abandons every live task and requests their stop (stop(discard)). [any thread]
  void abandon_all() noexcept;
  /// Whether no spawned task lives. A seq_cst load (see "Stop" in outstanding_work.h).
  /// [any thread]
  [[nodiscard]] bool empty() const noexcept {
    return live_.value.load(std::memory_order_seq_cst) == 0;
  }
  /// Set by abandon_all(): what branch_root::abandoned() reads.
  [[nodiscard]] const std::atomic<bool>& discarding() const noexcept { return discarding_; }
  /// What a spawned task observes (directly, or through its own source): stopped by
  /// abandon_all().
  [[nodiscard]] std::stop_token discard_token() const noexcept { return discard_.get_token(); }

 private:
  void (*on_empty_)(void*) noexcept;
  void* context_;
  cache_padded<std::atomic<std::uint64_t>> live_;
  // leave() calls between their start and their end: the executor may finish (and destroy this)
  // as soon as live_ is zero, so the destructor waits for them.
  std::atomic<std::uint32_t> leaving_{ 0 };
  std::atomic<bool> discarding_{ false };
  std::stop_source discard_;
};

/// What co_spawn, schedule() and sleep_for() need from the executors' insides.
struct executor_access {
  static executor_ref ref(handler_thread& thread) noexcept;
  static executor_ref ref(thread_pool& pool) noexcept;
  static spawn_registry& registry(handler_thread& thread) noexcept;
  static spawn_registry& registry(thread_pool& pool) noexcept;
  /// A plain post: throws executor_stopped after stop(), std::bad_alloc.
  static void post(handler_thread& thread, unique_function<void()>&& job);
  static void post(thread_pool& pool, unique_function<void()>&& job);
  /// Hands `error` to the executor's error path (a handler's on_error() runs on its thread:
  /// from elsewhere the error is posted there, or printed once the thread stopped). [any thread]
  static void report(handler_thread& thread, std::exception_ptr error) noexcept;
  static void report(thread_pool& pool, std::exception_ptr error) noexcept;
};

}  // namespace cyan::dispatch::detail
