#pragma once

// What the stop-request tests of the coroutine headers share.

#include <cstdint>
#include <system_error>
#include <thread>

#include "cyan/dispatch/handler_thread.h"

namespace cyan::test {

/// Whether `e` says an operation was cancelled by a stop request.
inline bool is_canceled(const std::system_error& e) {
  return e.code() == std::errc::operation_canceled;
}

/// Waits (bounded by the test's timeout) until `h` has started `n` jobs.
inline void wait_started(cyan::dispatch::handler_thread& h, std::uint64_t n) {
  while (h.stats().executed < n) {
    std::this_thread::yield();
  }
}

/// What a task stopped while it awaited saw: whether the await threw operation_canceled, and
/// whether it went on on its home thread.
struct stop_outcome {
  bool canceled = false;
  bool on_home = false;
};

}  // namespace cyan::test
