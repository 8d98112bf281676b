#pragma once

// The calling thread's io_uring: a completion source of a handler thread's round, shared by
// net/ (sockets) and fs/ (files), below both.
//
// One ring per thread that does ring I/O, set up on first use (ring::this_thread()) with
// SINGLE_ISSUER + COOP_TASKRUN + TASKRUN_FLAG (else without SINGLE_ISSUER, else plain; not
// DEFER_TASKRUN, see kSetups in ring.cpp): completions are produced when this thread enters
// the kernel, and the kernel raises a flag in the shared submission ring when it has some
// ready, so "is there anything?" is a read of memory, not a system call. The thread's round
// drives it:
//
//   drain      ring::drain() (the round's source, handler_thread_runtime's drain_sources()):
//              one io_uring_enter that submits every entry queued since the last drain and
//              reaps what completed, then each completion's ring_operation::complete(); only
//              when has_work() says there is something.
//   sleep      before the thread blocks in its loop, the sleep check asks has_work() (entries
//              queued, completions ready, the kernel's task-run flag): a queued entry is
//              submitted by the drain that the refused sleep leads to. Asleep, the thread is
//              woken by an eventfd registered with the ring, watched by the loop: the kernel
//              signals it when completions are produced.
//
// Operations. A ring_operation is queued with prepare() (an entry whose user_data is the
// operation) and is in flight until its completion is reaped; the kernel may write into its
// buffers until then. cancel() asks the kernel to end it early (the completion still comes:
// -ECANCELED, or the result when the kernel finished first); cancel_and_wait() blocks until it
// came, for a destructor that must not leave the kernel a pointer into memory about to be
// freed. Completions that cancel_and_wait() reaps for other operations are held and run by the
// next drain().
//
// Multishot operations (a receive queued with IORING_RECV_MULTISHOT) complete many times: a
// completion with IORING_CQE_F_MORE leaves the operation in flight, and only the one without
// it ends it; complete() runs once per completion. cancel_and_complete() ends such an
// operation and runs its completions at once instead of dropping them (they carry buffers of
// the provided buffer ring, which must go back to it).
//
// Provided buffers. provided_buffers() sets up, on first use, the thread's provided buffer
// ring (event/detail/buffer_ring.h) that multishot receives take their buffers from; it goes
// with the ring. Buffers given back are published before each time the ring enters the kernel.
//
// Backends. CYAN_NET_BACKEND=epoll|io_uring|auto (default auto) chooses, once per process:
// auto uses a ring where one can be set up and the epoll readiness path silently where not
// (seccomp's EPERM in containers, kernel.io_uring_disabled, an old kernel); io_uring makes the
// first ring I/O on a thread fail with a std::system_error saying why.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cyan/common/noncopyable.h"
#include "cyan/event/detail/buffer_ring.h"

struct io_uring;
struct io_uring_sqe;

namespace cyan::event {
class io;
class loop;
}  // namespace cyan::event

namespace cyan::event::detail {

/// What CYAN_NET_BACKEND asks for.
enum class backend_choice { automatic, epoll, io_uring };

/// CYAN_NET_BACKEND as read at the first call (unset or "auto": automatic). An unknown value
/// is reported on stderr once and taken as automatic. [any thread]
[[nodiscard]] backend_choice configured_backend() noexcept;

/// An operation submitted to a ring. Thread rules: the ring's thread only.
class ring_operation {
 public:
  /// Whether the kernel may still post a completion (and use the operation's buffers). False
  /// from the moment its last completion is reaped, which may be before that one runs.
  [[nodiscard]] bool in_flight() const noexcept { return in_flight_; }

  /// Whether a completion is still to run complete(): in flight, or reaped and waiting in the
  /// ring. An operation submitted again before then would have its old last completion taken
  /// for one of the new submission's.
  [[nodiscard]] bool completion_pending() const noexcept { return in_flight_ || held_ > 0; }

  /// The kernel finished the operation: `result` is the completion's res (a count, or -errno),
  /// `flags` its flags; one without IORING_CQE_F_MORE is the operation's last. Runs in
  /// ring::drain() on the ring's thread; may queue entries (the operation's next step, others'
  /// steps) and resume coroutines. A multishot operation's completions may be reaped in one
  /// batch: in_flight() is then already false while an earlier one runs.
  virtual void complete(int result, unsigned flags) noexcept = 0;

 protected:
  ring_operation() = default;
  ring_operation(const ring_operation&) = delete;
  ring_operation& operator=(const ring_operation&) = delete;
  ~ring_operation() = default;

 private:
  friend class ring;
  bool in_flight_ = false;
  unsigned held_ = 0;  // its completions reaped, waiting in ring::held_ to run
};

/// The calling thread's io_uring (see the top of this file). Every member is the ring's
/// thread's.
class ring : noncopyable {
 public:
  /// The calling thread's ring, set up on first use; null when the thread uses the epoll
  /// backend (CYAN_NET_BACKEND=epoll, or auto where no ring can be set up). Throws
  /// std::system_error (the setup's errno and a message saying why) when io_uring was chosen
  /// and cannot be set up, at every call.
  [[nodiscard]] static ring* this_thread();
  /// The calling thread's ring if it was set up; null otherwise (never sets one up).
  [[nodiscard]] static ring* this_thread_if_set_up() noexcept;
  /// Destroys the calling thread's ring, if any: operations still in flight are cancelled and
  /// their completions awaited without running them. For a thread's teardown, after its tasks.
  static void reset_this_thread() noexcept;

  ~ring();

  /// An entry for `op`, its user_data set to it; the caller fills in the rest (io_uring_prep_*)
  /// before the next drain(). Submits what is queued when the submission ring is full. `op`
  /// is in flight from here on. Throws std::system_error when the kernel refuses a submission.
  [[nodiscard]] io_uring_sqe* prepare(ring_operation& op);
  /// Asks the kernel to end `op` early; its completion still comes. Does nothing when `op` is
  /// not in flight.
  void cancel(ring_operation& op);
  /// Cancels `op` and blocks until its completion came (not run: `op` is going away), holding
  /// the other completions it reaps for the next drain(). Does nothing when `op` is not in
  /// flight.
  void cancel_and_wait(ring_operation& op) noexcept;
  /// cancel_and_wait() that runs `op`'s completions (held ones first, in order) instead of
  /// dropping them: for a multishot operation whose completions carry provided buffers.
  void cancel_and_complete(ring_operation& op) noexcept;

  /// The thread's provided buffer ring, set up on first use; null when the kernel refuses one
  /// (multishot receives are then not used).
  [[nodiscard]] buffer_ring* provided_buffers() noexcept;
  /// How many times the ring looked for completions: a call queued when this was n that
  /// completed by look n + 1 (the one right after the entry that submitted it) found its data
  /// there; one that completed later waited for it (the kernel armed a poll).
  [[nodiscard]] std::uint64_t reaps() const noexcept { return reaps_; }

  /// Submits the queued entries now (the kernel takes its references to their files: a
  /// descriptor may be closed after it). Throws std::system_error when the kernel refuses.
  void submit() { submit_queued(); }

  /// The round's source: submits the queued entries, reaps the completions and runs them;
  /// returns how many ran.
  std::size_t drain() noexcept;
  /// Whether drain() has something to do: entries queued, completions ready or held, or the
  /// kernel's task-run flag raised. Reads shared memory only.
  [[nodiscard]] bool has_work() const noexcept;

  /// Operations in flight.
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }
  /// The setup flags the kernel accepted (IORING_SETUP_*), for tests and reports.
  [[nodiscard]] unsigned setup_flags() const noexcept { return setup_flags_; }

 private:
  struct held_completion {
    ring_operation* op;
    int result;
    unsigned flags;
  };

  explicit ring(std::shared_ptr<loop> owner);
  void submit_queued();
  std::size_t reap() noexcept;
  // Runs the held completions in order; returns how many ran.
  std::size_t run_held() noexcept;
  void wait_until_done(ring_operation& op) noexcept;
  void publish_buffers() noexcept;
  [[nodiscard]] bool kernel_has_work() const noexcept;

  std::unique_ptr<io_uring> ring_;
  unsigned setup_flags_ = 0;
  int wake_fd_ = -1;  // the eventfd registered with the ring, watched by wake_
  std::unique_ptr<io> wake_;
  std::size_t in_flight_ = 0;
  std::vector<held_completion> held_;  // reaped by cancel_and_wait() for others
  std::uint64_t reaps_ = 0;            // see reaps()
  bool buffers_tried_ = false;         // provided_buffers() tried to set them up
  std::unique_ptr<buffer_ring> buffers_;
};

}  // namespace cyan::event::detail
