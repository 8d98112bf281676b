#include "cyan/dispatch/sleep.h"

#include <system_error>

#include "cyan/dispatch/detail/schedule_awaiter.h"

namespace cyan::dispatch::detail {

void throw_operation_canceled(const char* what) {
  throw std::system_error(std::make_error_code(std::errc::operation_canceled), what);
}

bool sleep_awaiter::suspend(std::coroutine_handle<> coroutine, branch* owner) {
  if (const admission refused = admit(coroutine, owner); refused != admission::wait) {
    return refused == admission::dropped;  // dropped: stays suspended; stopped: goes on
  }
  // The wheel counts the delay from a clock reading of its own, no earlier than this base (the
  // reading due_ was computed from, when known), so the sleep never ends before due_.
  const clock::time_point base = now_ != clock::time_point::min() ? now_ : clock::now();
  start_wait(coroutine, owner, std::chrono::ceil<timeout_type>(due_ - base));
  return true;
}

void sleep_awaiter::await_resume() {
  if (off_loop_) {
    off_loop_->awaiter.await_resume();
    return;
  }
  if (finish_wait()) {  // the only error: a stop request
    throw_operation_canceled("cyan::dispatch::sleep: cancelled by a stop request");
  }
}

}  // namespace cyan::dispatch::detail
