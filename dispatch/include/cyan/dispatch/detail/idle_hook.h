#pragma once

#include <cstddef>
#include <memory>

#include "cyan/dispatch/detail/coro_env.h"

namespace cyan::dispatch {
class handler_thread;
struct handler_thread_options;
}  // namespace cyan::dispatch

namespace cyan::dispatch::detail {

/// For cyan's thread_pool: lets a pool worker (a handler_thread) take work from somewhere else
/// — a shared queue, a sibling to steal from — whenever its own inbox is empty, and sleep only
/// when there is none anywhere. Given to start_pool_worker() (below); both functions run on the
/// worker's thread, outside any of its tasks, and must not throw.
///
/// No lost wake-up: a producer that makes work visible to has_work() must then call
/// wake_if_sleeping(worker) (below). The worker announces its sleep with a seq_cst RMW and then
/// calls has_work(); wake_if_sleeping() does a seq_cst RMW then a seq_cst load of that
/// announcement. So either the producer sees the worker asleep and wakes it, or has_work()
/// runs after the producer's RMW and — reading with acquire loads (or stronger) what the
/// producer stored before calling wake_if_sleeping() — sees the work.
class idle_hook {
 public:
  /// Runs some work found elsewhere and returns how many tasks it ran (0: found none). The
  /// worker calls it when its inbox is empty, before spinning and before sleeping; a bounded
  /// batch keeps the worker's own inbox (and its loop's timers) served.
  virtual std::size_t run_elsewhere(handler_thread& worker) noexcept = 0;

  /// Whether run_elsewhere() would find work now. Cheap: called while spinning, and once more
  /// after the worker announced that it is going to sleep.
  [[nodiscard]] virtual bool has_work(handler_thread& worker) noexcept = 0;

  /// The executor the worker's coroutines call home (the pool): published as the worker's
  /// current executor (see "Home" in coro_env.h).
  [[nodiscard]] virtual executor_ref home() noexcept = 0;

 protected:
  ~idle_hook() = default;
};

/// Starts a pool worker: a handler_thread (without a handler) whose round asks `hook` for work
/// when its inbox is empty (see "The sources" in handler_thread_runtime.cpp). `hook` must
/// outlive the thread. Throws like handler_thread's constructor. [any thread]
std::unique_ptr<handler_thread> start_pool_worker(idle_hook& hook, handler_thread_options options);

/// Wakes `worker` if it sleeps or is about to, so that it looks at its idle_hook again. Cheap
/// when it is awake (no syscall). [any thread, while `worker` is alive]
void wake_if_sleeping(handler_thread& worker) noexcept;

}  // namespace cyan::dispatch::detail
