#include "cyan/dispatch/detail/ring_wait.h"

#include <cerrno>
#include <cstdio>
#include <exception>

namespace cyan::dispatch::detail {

ring_wait::~ring_wait() {
  withdraw_operation();
}

void ring_wait::withdraw_operation() noexcept {
  if (ring_ != nullptr) {
    // The ring is the thread's; it is gone only after the thread's tasks (its teardown), and then
    // it waited for every operation in flight.
    if (event::detail::ring::this_thread_if_set_up() == ring_) {
      ring_->cancel_and_wait(*this);
    }
    ring_ = nullptr;
  }
  withdraw();
}

void ring_wait::start_ring_wait(event::detail::ring& ring, std::coroutine_handle<> coroutine,
                                branch* owner, timeout_type timeout) {
  start_wait(coroutine, owner, timeout);
  try {
    prepare(ring.prepare(*this));
  } catch (...) {
    withdraw();
    throw;
  }
  ring_ = &ring;
}

void ring_wait::start_ring_operation(event::detail::ring& ring) {
  prepare(ring.prepare(*this));
  ring_ = &ring;
}

void ring_wait::interrupt(std::error_code why) noexcept {
  interrupt_operation(*this, why);
}

timed_wait::interruption ring_wait::interrupt_operation(timed_wait& wait,
                                                        std::error_code why) noexcept {
  auto& self = static_cast<ring_wait&>(wait);
  if (self.ring_ == nullptr) {
    return interruption::plain;  // waiting without the ring (a readiness wait)
  }
  if (!self.in_flight()) {
    return interruption::completed;  // the wait ends as the completion recorded
  }
  if (!self.interrupted_) {
    self.interrupted_ = true;
    self.interruption_ = why;
    try {
      self.ring_->cancel(self);
    } catch (const std::exception& error) {
      // The cancellation could not be submitted: the operation ends when the kernel ends it.
      std::fprintf(stderr, "cyan: cancelling an io_uring operation failed: %s\n", error.what());
    }
  }
  return interruption::taken;
}

void ring_wait::complete(int result, unsigned /*flags*/) noexcept {
  if (interrupted_) {
    // Only what the kernel did beats the interruption: a failure (-ECANCELED, or the socket
    // closed under a call not yet submitted) reports why the operation was interrupted.
    if (result < 0 || !completed(result)) {
      error_ = interruption_;  // a partial transfer's count stays with the derived wait
    }
  } else if (!completed(result)) {
    try {
      prepare(ring_->prepare(*this));  // the next step
      return;
    } catch (const std::system_error& error) {
      error_ = error.code();
    }
  }
  end_interrupted_wait();
}

}  // namespace cyan::dispatch::detail
