#pragma once

#include <exception>

#include "cyan/common/unique_function.h"

namespace cyan::dispatch::detail {

/// Destroys `task`'s closure, leaving `task` empty, and hands what the closure's destructor threw
/// (a capture whose destructor is noexcept(false), e.g. one that posts to the executor that is
/// stopping) to `report(std::exception_ptr)`, which must not throw. Executors drop every task
/// they ran or cancel through this, so such an exception takes the executor's error path instead
/// of terminating the process, and the drain or stop goes on. [the thread that owns `task`]
template <typename Report>
void destroy_task(unique_function<void()>& task, Report&& report) noexcept {
  try {
    task.reset();
  } catch (...) {
    report(std::current_exception());
  }
}

}  // namespace cyan::dispatch::detail
