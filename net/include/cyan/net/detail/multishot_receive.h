#pragma once

// A stream socket's multishot receive on the io_uring backend (see socket_core.h for when a
// socket uses one): one IORING_RECV_MULTISHOT receive that stays armed across reads and takes
// its buffers from the thread's provided buffer ring (event/detail/buffer_ring.h). What it
// receives is held here, in arrival order, until reads copy it out.
//
//   held       each completion's bytes (buffer id, length, bytes consumed) wait here; a read
//              copies them into its span and gives each buffer back once consumed. A waiting
//              read is told of every completion (io_wait::multishot_arrived()).
//   bounded    once kHoldBuffers buffers are held the receive is cancelled, so that a slow
//              reader does not drain the thread's buffers: the kernel keeps the rest in the
//              socket's receive buffer (TCP's window). The bound is what the socket keeps
//              once the cancellation lands: before it does, the kernel may fill a batch more
//              buffers (a multishot receive takes what the socket has, buffer after buffer).
//              A socket that reaches the bound receives faster than it reads (bulk transfer):
//              it goes back to single-shot receives into the reader's span (throttled()).
//   ended      a completion without IORING_CQE_F_MORE ends the receive: end of stream (res 0)
//              and errors are held after the bytes and reported after them; ENOBUFS (the
//              thread's buffers ran dry: starved()) and a cancellation end it without an
//              outcome, and the socket's next read that needs data arms it again or, when it
//              starved, makes a single-shot call instead. EINVAL before any byte is a kernel
//              without multishot receives (before 6.0): refused().
//   orphaned   the socket was released on a thread other than the ring's, or closed after the
//              ring's thread finished (a close elsewhere is handed to that thread while it
//              runs, see socket_core::close()): the receive cannot be cancelled from there,
//              so orphan() hands it to its ring's thread, where its
//              next completion gives its buffers back and cancels it, and its last one frees it
//              (the socket's shutdown() brings that completion about). One not armed is freed
//              at once, the buffers it held forgotten: the thread's pool is that much smaller.
//              A ring destroyed before that completion came (its thread finished) does not run
//              it: the receive is then leaked, not freed under the kernel.
//
// Thread rules: the ring's thread only, but orphan() [any thread].

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cyan/event/detail/ring.h"

namespace cyan::net::detail {

class io_wait;

/// A socket's multishot receive and the bytes it holds (see the top of this file).
class multishot_receive final : public event::detail::ring_operation {
 public:
  /// Buffers a socket holds before its receive is cancelled: up to 64 KiB, enough to keep a
  /// request/response socket's messages coming, few enough that the thread's 256 buffers
  /// serve dozens of slow readers.
  static constexpr std::size_t kHoldBuffers = 4;

  /// Throws std::bad_alloc.
  multishot_receive(event::detail::ring& ring, event::detail::buffer_ring& buffers);
  /// Gives the held buffers back. Not in flight (cancel_and_complete() came first).
  ~multishot_receive();

  /// Queues the receive on `fd`, once the previous one's last completion has run
  /// (!completion_pending(): that one may hold an error the socket reports only once). Throws
  /// std::system_error when the ring refuses the entry.
  void arm(int fd);

  /// Bytes, or an end of stream or error, to report.
  [[nodiscard]] bool has_held() const noexcept { return first_ < pieces_.size() || end_ != kNoEnd; }
  /// Copies held bytes into `into`, in order, giving back the buffers consumed; the count.
  [[nodiscard]] std::size_t take(std::span<std::byte> into) noexcept;
  /// With no bytes held: the end held, 0 (end of stream, kept for the reads after) or -errno
  /// (reported once); nullopt when none.
  [[nodiscard]] std::optional<int> take_end() noexcept;
  /// Bytes held.
  [[nodiscard]] std::size_t held_bytes() const noexcept;

  /// The last receive ended for want of buffers (cleared by clear_starved()).
  [[nodiscard]] bool starved() const noexcept { return starved_; }
  void clear_starved() noexcept { starved_ = false; }
  /// The last receive was cancelled because the hold reached its bound: the socket receives
  /// faster than it reads (cleared by arm()).
  [[nodiscard]] bool throttled() const noexcept { return throttled_; }
  /// The kernel refused a multishot receive.
  [[nodiscard]] bool refused() const noexcept { return refused_; }

  /// The read waiting for the next completion, or null.
  io_wait* reader = nullptr;

  /// Gives the receive up from a thread other than its ring's (see the top of this file): true
  /// when it is armed and its ring's thread frees it at its last completion, which the caller
  /// must bring about (shutdown()); false when it was not, and it is freed now, its buffers
  /// forgotten (the ring's, not this thread's to give back). Either way `this` is the
  /// caller's no more. [any thread]
  [[nodiscard]] bool orphan() noexcept;

 private:
  static constexpr int kNoEnd = 1;
  struct piece {
    std::uint16_t id;
    std::uint32_t length;
    std::uint32_t consumed;
  };

  // state_: who frees the receive. kIdle: not in flight, the socket's; kArmed: in flight;
  // kOrphaned: orphan() came while it was armed, its last completion frees it.
  static constexpr std::uint8_t kIdle = 0;
  static constexpr std::uint8_t kArmed = 1;
  static constexpr std::uint8_t kOrphaned = 2;

  void complete(int result, unsigned flags) noexcept override;
  void ended(int result) noexcept;
  void cancel() noexcept;
  void complete_orphaned(int result, unsigned flags) noexcept;

  event::detail::ring& ring_;
  event::detail::buffer_ring& buffers_;
  std::vector<piece> pieces_;  // held, oldest first from first_
  std::size_t first_ = 0;
  int end_ = kNoEnd;         // held end: 0 end of stream, -errno an error
  bool received_ = false;    // a byte came since arm(): EINVAL is then not a refusal
  bool cancelling_ = false;  // cancel() asked the kernel to end the receive
  bool throttled_ = false;
  bool starved_ = false;
  bool refused_ = false;
  // Exchanged by orphan() on any thread and by the last completion on the ring's thread: the
  // second of the two frees the receive (acq_rel on both sides: each sees the other's writes).
  std::atomic<std::uint8_t> state_{ kIdle };
};

}  // namespace cyan::net::detail
