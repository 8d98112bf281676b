#pragma once

#include <coroutine>
#include <system_error>

#include "cyan/dispatch/detail/coro_env.h"

namespace cyan::dispatch::detail {

/// Throws std::system_error(operation_canceled) for an operation that a stop request ended.
[[noreturn]] void throw_operation_canceled(const char* what);

/// What schedule() and yield() return: `co_await` it in a cyan::dispatch::task to continue on
/// `target` (through its queue, behind what is queued there already). In any other coroutine it
/// moves that coroutine all the same. A task whose stop was requested does not move: the
/// co_await throws std::system_error(std::errc::operation_canceled). A null target (yield() on
/// a thread that is no executor's) continues at once.
class [[nodiscard]] schedule_awaiter {
 public:
  explicit schedule_awaiter(executor_ref target) noexcept : target_(target) {}

  [[nodiscard]] bool await_ready() const noexcept { return !target_; }

  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) noexcept {
    branch* owner = branch_of(suspended);
    switch (admit(suspended, owner)) {
      case admission::dropped:
        return true;
      case admission::stopped:
        cancelled_ = true;
        return false;
      case admission::wait:
        break;
    }
    resume_later_on(target_, suspended, owner);
    return true;
  }

  void await_resume() const {
    if (cancelled_) {
      throw_operation_canceled("cyan::dispatch::schedule: cancelled by a stop request");
    }
  }

 private:
  executor_ref target_;
  bool cancelled_ = false;
};

}  // namespace cyan::dispatch::detail
