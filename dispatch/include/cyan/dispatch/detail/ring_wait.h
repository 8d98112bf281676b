#pragma once

// A coroutine's wait for an operation on the thread's io_uring (event/detail/ring.h): a socket's
// read or write on the io_uring backend (net/), a file's (fs/). The one base of such waits.
//
// A ring wait is a timed_wait (its phases in detail/timed_wait.h) that is interruptible: the
// kernel may write into the operation's buffers until its completion is reaped, so nothing but
// that completion resumes the coroutine. In phases:
//   start        start_ring_wait(): the wait starts (deadline, stop token), then the operation's
//                first step is queued on the ring (prepare()); it is submitted by the thread's
//                next drain. A wait that started without the ring may go to it later
//                (start_ring_operation()); until then it ends as a plain timed_wait.
//   completed    the completion runs completed(): the operation is over (its result, or error_
//                set), or it queued its next step (a partial write goes on);
//   interrupted  the deadline, a stop request or interrupt() (a socket's close()): the kernel is
//                asked to cancel; the completion still ends the wait: -ECANCELED with the
//                interruption's error, a result with that result (a read the kernel finished
//                first keeps its bytes; a partial transfer keeps its count);
//   destroyed    the frame goes while the operation is in flight: the destructor cancels it and
//                blocks until its completion came (ring::cancel_and_wait), so the kernel never
//                writes into freed memory. Derived destructors call withdraw_operation() first.

#include <coroutine>
#include <system_error>

#include "cyan/dispatch/detail/timed_wait.h"
#include "cyan/event/detail/ring.h"

namespace cyan::dispatch::detail {

/// A timed, cancellable wait for a ring operation (see the top of this file). Every member is
/// the ring's thread's. Neither copyable nor movable: the ring knows it by address.
class ring_wait : protected timed_wait, public event::detail::ring_operation {
 protected:
  /// `expiry`: the error a passed deadline ends the operation with (std::errc::timed_out).
  explicit ring_wait(std::errc expiry, withdraw_fn withdraw = nullptr) noexcept
      : timed_wait(expiry, withdraw, &interrupt_operation) {}
  ~ring_wait();

  /// Fills `entry` (io_uring_prep_*) for the operation's next step.
  virtual void prepare(io_uring_sqe* entry) noexcept = 0;
  /// A step's completion (`result`: a count or -errno): true when the operation is over (error_
  /// set when it failed), false when another step follows (prepare() is called for it).
  virtual bool completed(int result) noexcept = 0;

  /// The start phase on `ring` (admit() came first): waits until `timeout` (kNoTimeout: none),
  /// then queues the first step. Throws std::bad_alloc or std::system_error before the
  /// operation started.
  void start_ring_wait(event::detail::ring& ring, std::coroutine_handle<> coroutine, branch* owner,
                       timeout_type timeout);
  /// Queues the operation's first step on `ring` for a wait that started without the ring (a
  /// socket's read waiting for its multishot receive, which ended): from here on it ends as a
  /// ring wait. Throws std::system_error when the ring refuses the entry (nothing queued).
  void start_ring_operation(event::detail::ring& ring);
  /// Whether the operation went to the ring (start_ring_wait() or start_ring_operation()).
  [[nodiscard]] bool on_ring() const noexcept { return ring_ != nullptr; }
  /// The interrupted end for a reason of the derived wait's (a socket closed): `why` unless the
  /// completion says otherwise. Does nothing when the operation is not in flight.
  void interrupt(std::error_code why) noexcept;
  /// The destroyed end: cancels an operation in flight and waits for its completion, then
  /// withdraws the wait. Derived destructors call it first; a later call does nothing.
  void withdraw_operation() noexcept;

 private:
  void complete(int result, unsigned flags) noexcept final;
  static interruption interrupt_operation(timed_wait& wait, std::error_code why) noexcept;

  event::detail::ring* ring_ = nullptr;  // set while the operation may be in the ring
  std::error_code interruption_;
  bool interrupted_ = false;
};

}  // namespace cyan::dispatch::detail
