#pragma once

// How a socket operation waits.
//
// A socket_core owns one descriptor (non-blocking) and, once the socket is attached to a thread,
// one io watcher on that thread's loop. An operation (an io_wait) first makes its system call;
// only when that would block does it register with the core as the socket's reader or writer,
// and the watcher runs while someone waits. Reads adapt (speculate_read()): once the last two
// speculative reads of a socket would have blocked — a request/response or pipe-chain pattern,
// where the next read comes before the peer's data — a read waits for readiness first (the
// level-triggered watcher reports data already there at the loop's next turn), trying the
// system call first again after 16 such reads, then after 32, 64, ... up to 256 while these
// tries keep missing (each miss is a wasted system call), and for good once such a try finds
// data. Reads are fair: of the reads of a socket that finish without waiting (data already
// there, or bytes its multishot receive holds), every kReadsBeforeYield-th in a row resumes its
// task through the thread's queue rather than at once, so a connection that never has to wait
// cannot starve the thread's other tasks (io_wait::yield_after_reads_at_once()).
//
// On the io_uring backend (the thread has a ring, event/detail/ring.h) an operation does not
// make its system call: it queues the call on the thread's ring and waits for its completion,
// and the thread's next drain submits the queued calls of all its sockets in one system call.
// The wait is then a dispatch::detail::ring_wait (cyan/dispatch/detail/ring_wait.h): a
// deadline, a stop request or close() ask the kernel to cancel, and the completion decides
// (the bytes a read got first are the caller's); the socket has no watcher. A call that the
// kernel answers with EAGAIN (O_NONBLOCK on kernels that honour it for ring operations) waits
// with a ring poll for the direction and is made again.
//
// Stream reads on io_uring adapt too (net/detail/multishot_receive.h; a datagram receive never
// does: it keeps its boundary, sender and truncation, so each is its own recvmsg()). A stream
// socket's reads start as
// single-shot receives into the caller's span (no copy). A receive that completed only after
// the look for completions that followed its submission waited for its data (the kernel armed
// a poll for it first: io_arm_apoll, a poll per read); once two reads in a row waited, the socket
// switches to one multishot receive that stays armed across reads and takes buffers from the
// thread's provided buffer ring. The bytes it receives are held by the socket, in order; a read
// copies held bytes first and waits (for the receive's next completion) only when none are
// held, so a timeout or a stop request just ends the wait and the bytes that come later are the
// next read's. The hold is bounded (multishot_receive::kHoldBuffers): at the bound the receive
// is cancelled and the socket goes back to single-shot receives (it receives faster than it
// reads: a bulk transfer), switching again once its reads wait again; a receive that ended
// (no IORING_CQE_F_MORE) is armed again by the next read that needs data, at once for a read
// waiting; when the thread's buffers ran dry (ENOBUFS) that read makes a single-shot receive
// into its span instead, and a kernel that refuses multishot receives (before 6.0) keeps the
// socket on single-shot receives. A socket whose reads find data at once (bulk transfer) never
// switches. close() ends the receive (cancel and wait, on the socket's thread) and gives the
// held buffers back; release() ends it and hands what is held to the socket_handle, which
// adopt() gives to the next socket.
//
// On the epoll backend, the wait is a dispatch::detail::timed_wait (its phases and ends are
// listed in cyan/dispatch/detail/timed_wait.h): timed out is its expiry (std::errc::timed_out), a
// stop request its cancellation (operation_canceled), and the thread's finish ends it and drops the
// task. The socket adds two ends of its own:
//
//   ready      the watcher saw the direction ready: the operation retries its system call
//              (and waits on when that would still block);                        [loop thread]
//   closed     close() or the socket's destruction: operation_canceled.          [loop thread]
//
// Two rules come before any system call: a socket operation runs on a handler thread, never on
// a thread_pool (std::logic_error: a pool task resumes on any worker, and the socket's watcher
// is one worker's); and a second read (or write) while one is pending is refused
// (std::logic_error), so that its bytes never mix with the pending one's.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <system_error>
#include <vector>

#include "cyan/common/detail/adaptive_attempts.h"
#include "cyan/common/noncopyable.h"
#include "cyan/dispatch/detail/ring_wait.h"
#include "cyan/dispatch/detail/thread_anchor.h"
#include "cyan/dispatch/detail/timed_wait.h"
#include "cyan/event/detail/ring.h"
#include "cyan/event/io.h"
#include "cyan/event/loop.h"
#include "cyan/event/timer_wheel.h"
#include "cyan/net/detail/multishot_receive.h"
#include "cyan/net/endpoint.h"
#include "cyan/net/error.h"

namespace cyan::net::detail {

/// An operation's time limit; kNoTimeout waits for ever.
using timeout_type = dispatch::detail::timed_wait::timeout_type;
inline constexpr timeout_type kNoTimeout = dispatch::detail::timed_wait::kNoTimeout;

/// `limit` as a timeout (see dispatch::detail::to_timeout).
using dispatch::detail::to_timeout;

/// Throws std::system_error(error, what) when `error` is set.
void throw_if(const std::error_code& error, const char* what);

/// A socket() (SOCK_NONBLOCK | SOCK_CLOEXEC) of `family` and `type`; throws std::system_error.
[[nodiscard]] int open_socket(int family, int type, const char* what);

/// errno as a std::error_code.
[[nodiscard]] std::error_code last_error() noexcept;

/// What io_call() returns besides a byte count.
inline constexpr long kWouldBlock = -2;  // EAGAIN / EWOULDBLOCK: wait for readiness
inline constexpr long kFailed = -1;      // `error` is set

/// Makes the system call `call` (returning a byte count, or -1 with errno), again after EINTR:
/// the count, kWouldBlock, or kFailed with `error` set.
template <typename Call>
[[nodiscard]] long io_call(Call call, std::error_code& error) noexcept {
  for (;;) {
    const long n = call();
    if (n >= 0) {
      return n;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return kWouldBlock;
    }
    if (errno != EINTR) {
      error = last_error();
      return kFailed;
    }
  }
}

/// setsockopt() of an int option; throws std::system_error(what).
void set_option(int fd, int level, int name, int value, const char* what);

/// getsockname() (or getpeername() when `peer`); throws std::system_error(what).
[[nodiscard]] endpoint socket_name(int fd, bool peer, const char* what);

class io_wait;

/// One descriptor and its readiness watcher (see the top of this file).
///
/// Thread rules: the core attaches to the handler thread that creates it, otherwise to the
/// first handler thread that runs an operation on it; from then on every operation is that
/// thread's (debug builds abort with a message otherwise). An operation on a thread_pool worker
/// throws std::logic_error. Closing or destroying a core without a pending operation is allowed
/// on any thread: off its thread, the close is handed to that thread (see close()).
class socket_core : noncopyable {
 public:
  /// Owns `fd`, which must be non-blocking.
  explicit socket_core(int fd);
  /// close().
  ~socket_core();

  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// The ring of the thread the core is attached to (the io_uring backend); null on the epoll
  /// backend or before the core is attached.
  [[nodiscard]] event::detail::ring* ring() const noexcept { return ring_; }
  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
  [[nodiscard]] bool has_waiters() const noexcept {
    return reader_ != nullptr || writer_ != nullptr;
  }
  /// Whether a read waits (registered with wait()); false once its completion ran, before its
  /// task resumed.
  [[nodiscard]] bool is_reading() const noexcept { return reader_ != nullptr; }

  /// Attaches the core to the calling thread if it is not attached yet, else checks (debug
  /// builds) that the calling thread is its own, aborting with a message naming `operation`
  /// otherwise. Throws std::logic_error off a handler thread (a thread_pool worker included),
  /// std::system_error when CYAN_NET_BACKEND=io_uring and the thread cannot set up a ring.
  void attach_here(const char* operation);
  /// Throws std::logic_error when an operation of `direction` (event::io_events::read or
  /// write) is pending already: one read and one write at a time. [its thread]
  void check_direction_free(event::io_events direction) const;
  /// The thread check of attach_here() without attaching: for calls that any thread may make
  /// on a socket no thread has used yet (release(), shutdown_send(), close() with waiters).
  void check_owner(const char* operation) const noexcept {
    if (loop_) {
      check_thread(operation);
    }
  }

  /// Ends every pending operation with operation_canceled (they resume later, through their
  /// threads' queues; on io_uring when the kernel confirms the cancellation, or with what it
  /// completed first), stops the watcher and closes the descriptor. Does nothing when closed.
  /// On a thread other than the one the core is attached to, without a pending operation, the
  /// core is closed at once (is_open() is false) but the descriptor stays open until that
  /// thread has closed it, in a later round: its loop may still watch the descriptor, and its
  /// number must not be reused meanwhile. When that thread has finished, the descriptor is
  /// closed here and now. Never blocks.
  void close() noexcept;

  /// Gives the descriptor up without closing it. Throws std::logic_error while an operation is
  /// pending. Ends a multishot receive; call take_all_held() first to keep what it held.
  [[nodiscard]] int release();

  /// Whether bytes (or a received end of stream or error) wait to be read: a multishot
  /// receive's, or those adopted with carry(). [its thread]
  [[nodiscard]] bool has_held() const noexcept {
    return carried_offset_ < carried_.size() || (multishot_ && multishot_->has_held());
  }
  /// Copies held bytes into `into`, in order; the count. [its thread]
  [[nodiscard]] std::size_t take_held(std::span<std::byte> into) noexcept;
  /// With no bytes held, the received end: 0 for end of stream, -errno; nullopt when none.
  [[nodiscard]] std::optional<int> take_held_end() noexcept {
    return carried_offset_ < carried_.size() || !multishot_ ? std::nullopt : multishot_->take_end();
  }
  /// Ends a multishot receive (cancelled, and waited for) and returns every byte held, for
  /// release(). A held end or error is not kept: the kernel reports it again. [its thread]
  [[nodiscard]] std::vector<std::byte> take_all_held();
  /// Bytes to serve before any received (from take_all_held() on another socket).
  void carry(std::vector<std::byte> bytes) noexcept {
    carried_ = std::move(bytes);
    carried_offset_ = 0;
  }

  /// How a read that found nothing held gets its bytes on io_uring.
  enum class ring_read {
    single_shot,  // a receive into the caller's span
    multishot,    // the multishot receive's next completion (armed now if it was not)
  };
  /// Chooses for a read that needs data (see the top of this file). [its thread]
  [[nodiscard]] ring_read plan_ring_read() noexcept;
  /// Records whether a single-shot receive waited for its data. [its thread]
  void ring_read_completed(bool waited) noexcept;
  /// Makes `reader` (registered with wait()) the one the multishot receive tells.
  void wait_for_multishot(io_wait& reader) noexcept { multishot_->reader = &reader; }
  /// For a read waiting for the multishot receive that still needs data after a completion:
  /// true when it waits on (the receive goes on, or was armed again); false when it must make
  /// a single-shot receive instead (no buffers, or refused). [its thread]
  [[nodiscard]] bool keep_waiting_for_multishot() noexcept;
  /// Bytes the multishot receive holds (for tests: the hold's bound). [its thread]
  [[nodiscard]] std::size_t multishot_held_bytes() const noexcept {
    return multishot_ ? multishot_->held_bytes() : 0;
  }
  /// Whether a multishot receive is armed (for tests: a socket switched to it). [its thread]
  [[nodiscard]] bool reading_multishot() const noexcept {
    return multishot_ && multishot_->in_flight();
  }

  /// Registers `op` as the socket's reader (event::io_events::read) or writer and starts the
  /// watcher for it (epoll backend). That direction has no operation (check_direction_free() came
  /// first).
  void wait(io_wait& op, event::io_events direction) noexcept;
  /// Withdraws `op` if it is registered; stops the watcher when nothing waits any more.
  void unwait(io_wait& op) noexcept;

  /// Whether the next read should make its system call before waiting for readiness: yes
  /// unless the last two speculative reads would have blocked; then once after 16 reads that
  /// waited first, and after twice as many each time such a try misses again, up to 256 (see
  /// the top of this file). [its thread]
  [[nodiscard]] bool speculate_read() noexcept { return read_attempts_.should_try(); }
  /// Records what a speculative read found. [its thread]
  void speculated_read(bool would_block) noexcept { read_attempts_.record(!would_block); }

  /// Reads in a row that may finish without waiting before one lets its thread's other work
  /// run first (libuv reads at most 32 times per readiness).
  static constexpr unsigned kReadsBeforeYield = 32;
  /// Counts a read that finished without waiting: true (and the count starts over) when it is
  /// the kReadsBeforeYield-th in a row, and so must yield. [its thread]
  [[nodiscard]] bool read_finished_at_once() noexcept {
    if (++reads_at_once_ < kReadsBeforeYield) {
      return false;
    }
    reads_at_once_ = 0;
    return true;
  }
  /// A read waited: the count of reads in a row starts over. [its thread]
  void read_waited() noexcept { reads_at_once_ = 0; }

 private:
  struct handing_over {};
  /// Takes `from`'s descriptor, thread and multishot receive, for a close on that thread; the
  /// watcher (stopped: nothing waits) stays with `from`.
  socket_core(socket_core& from, handing_over) noexcept;
  void close_here() noexcept;
  void hand_close_to_thread() noexcept;
  void on_ready(event::io_events ready) noexcept;
  void update_watcher() noexcept;
  void check_thread(const char* operation) const noexcept;
  void make_multishot() noexcept;
  [[nodiscard]] bool arm_multishot() noexcept;
  void end_multishot() noexcept;

  int fd_;
  std::shared_ptr<event::loop> loop_;    // null until attached
  event::detail::ring* ring_ = nullptr;  // the io_uring backend's: loop_'s thread's ring
  std::shared_ptr<dispatch::detail::thread_anchor> thread_;  // loop_'s thread: for close()
  std::optional<event::io> watcher_;  // on loop_, once attached, on the epoll backend
  io_wait* reader_ = nullptr;
  io_wait* writer_ = nullptr;
  bool* destroyed_ = nullptr;  // set by on_ready() while it runs: the core may die under it
  cyan::detail::adaptive_attempts read_attempts_;  // see speculate_read()
  unsigned reads_at_once_ = 0;                     // see read_finished_at_once()
  // io_uring's multishot receive (see the top of this file): made at the first read.
  std::unique_ptr<multishot_receive> multishot_;
  std::vector<std::byte> carried_;      // bytes adopted from another socket (carry())
  std::size_t carried_offset_ = 0;      // of which already read
  std::uint8_t ring_reads_waited_ = 0;  // single-shot receives in a row that waited
  bool use_multishot_ = false;          // the reads keep waiting: read through a multishot receive
  bool multishot_refused_ = false;      // no provided buffers, or a kernel before 6.0
};

/// The part every socket awaiter shares: on epoll, try first, wait for readiness on EAGAIN; on
/// io_uring, queue the call and wait for its completion; a timeout, stop-token and close
/// cancellation (see the top of this file). Derived awaiters implement attempt(), prepare_call()
/// and call_completed(), and an await_resume() that calls finish() first. Neither copyable nor
/// movable: a pending operation is registered by address (with its socket, its ring, and as a
/// timed_wait).
class io_wait : protected dispatch::detail::ring_wait {
 public:
  [[nodiscard]] bool await_ready() const noexcept { return false; }

  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) {
    return suspend(suspended, dispatch::detail::branch_of(suspended));
  }

 protected:
  io_wait(socket_core* core, event::io_events direction, timeout_type timeout) noexcept
      : ring_wait(std::errc::timed_out, &withdraw_from_socket),
        core_(core),
        timeout_(timeout),
        direction_(direction) {}
  ~io_wait();

  /// Makes the system call(s): true when the operation has finished (with its result, or
  /// error_ set), false when it would block. Runs on the socket's thread.
  virtual bool attempt() noexcept = 0;
  /// True for reads, which may wait for readiness before their first attempt (see
  /// socket_core::speculate_read()); connect, accept and writes always try first.
  [[nodiscard]] virtual bool adaptive_read() const noexcept { return false; }
  /// True for reads of a stream, which may be served from the bytes the socket holds and, on
  /// io_uring, switch to the multishot receive. A datagram read is adaptive but not a stream
  /// read: each datagram keeps its boundary, its sender and its truncation, so every receive is
  /// its own recvmsg().
  [[nodiscard]] virtual bool stream_read() const noexcept { return false; }

  /// The io_uring backend's attempt(): fills `entry` for the operation's next system call.
  virtual void prepare_call(io_uring_sqe* entry) noexcept = 0;
  /// That call's result (a count, or -errno; never -EAGAIN or -EINTR): true when the operation
  /// is over (error_ set when it failed), false when another call follows.
  virtual bool call_completed(int result) noexcept = 0;
  /// True when the first call on io_uring waits for readiness first (an accept after EMFILE).
  [[nodiscard]] virtual bool poll_first() noexcept { return false; }

  /// For await_resume(): waits for a stop callback still running elsewhere, then throws error_
  /// as std::system_error(error_, what) when set.
  void finish(const char* what);
  /// finish() for an operation that moves its bytes over several system calls: throws
  /// transfer_error(error_, what, transferred) instead.
  void finish_transfer(const char* what, std::size_t transferred);

  socket_core* core_;  // null once the socket was closed under the operation

 private:
  friend class socket_core;

  friend class multishot_receive;

  static void withdraw_from_socket(timed_wait& wait) noexcept;
  bool suspend(std::coroutine_handle<> coroutine, dispatch::detail::branch* owner);
  bool yield_after_reads_at_once(std::coroutine_handle<> coroutine,
                                 dispatch::detail::branch* owner) noexcept;
  bool suspend_on_ring(event::detail::ring& ring, std::coroutine_handle<> coroutine,
                       dispatch::detail::branch* owner);
  /// A completion of the multishot receive this read waits for: serve it, wait on, or make a
  /// single-shot receive. Touches nothing after the wait ends (the task may end the socket).
  void multishot_arrived() noexcept;
  void ready() noexcept;
  void closed() noexcept;
  // ring_wait
  void prepare(io_uring_sqe* entry) noexcept final;
  bool completed(int result) noexcept final;

  timeout_type timeout_;
  event::io_events direction_;
  bool polling_ = false;                // io_uring: the next call is a poll for direction_
  std::uint64_t submitted_before_ = 0;  // io_uring: the ring's reaps() when the call was queued
};

}  // namespace cyan::net::detail
