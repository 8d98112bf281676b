#pragma once

#include <chrono>
#include <future>
#include <latch>

#include "cyan/dispatch/future.h"
#include "cyan/dispatch/handler_thread.h"

namespace cyan::test {

/// A task on a handler thread that waits for `gate`, then returns 7 through `result`: a future
/// that a test can await, or destroy, knowing it is not ready until open_and_wait_behind().
class gated_task {
 public:
  explicit gated_task(cyan::dispatch::handler_thread& thread)
      : result(thread.post_awaitable([this] {
          gate.wait();
          return 7;
        })),
        thread_(thread) {}

  /// Opens the gate, then waits for a second task posted behind the gated one and returns
  /// whether it ran: then the gated task has completed and run whatever continuation it still
  /// had. The thread has run two tasks.
  [[nodiscard]] bool open_and_wait_behind() {
    gate.count_down();
    auto behind = thread_.post_awaitable([] { return 8; });
    // 10 s: a bound for a loaded machine, not a deadline; the task takes microseconds.
    return behind.wait_for(std::chrono::seconds(10)) == std::future_status::ready &&
           behind.get() == 8;
  }

  std::latch gate{ 1 };  // declared before result: the task may wait on it at once
  cyan::dispatch::future<int> result;

 private:
  cyan::dispatch::handler_thread& thread_;
};

}  // namespace cyan::test
