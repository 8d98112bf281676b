#pragma once

// The pool's side of fork-join, as join.h and future.h reach it: the job a worker's local
// deque holds, the calling thread's worker, and the helping wait (docs/design/scheduler.md).

#include <atomic>
#include <chrono>
#include <cstdint>

namespace cyan::dispatch::detail {

/// What a pool worker's local deque holds (dispatch/src/work_deque.h): a task posted from a
/// pool task (boxed), or a join's forked half (on the joiner's stack). `execute(job, discard)`
/// runs it once — or, with discard (the pool's stop(discard) is under way), drops it if the job
/// may be dropped (a posted task; a join's half always runs: its joiner started already).
struct pool_job {
  using execute_fn = void (*)(pool_job* self, bool discard) noexcept;
  execute_fn execute;
};

/// A pool worker, as seen from outside the pool's sources (its state derives from this).
struct fork_worker {
  /// The worker's pool (its pool_core), compared by identity with executor_access::ref().
  const void* pool = nullptr;
};

/// The calling thread's pool worker; null on any other thread. Set once by the worker.
inline thread_local fork_worker* this_thread_worker = nullptr;

/// What a helping wait waits for.
class help_target {
 public:
  /// Whether the awaited thing is done (acquire: what it produced is visible).
  [[nodiscard]] virtual bool done() noexcept = 0;
  /// Blocks for at most `timeout`, returning early when done. May return spuriously.
  virtual void park(std::chrono::nanoseconds timeout) noexcept = 0;

 protected:
  ~help_target() = default;
};

/// Adds `job` to `worker`'s local deque (waking an idle worker to steal it if none searches);
/// false when the deque is full (the caller runs the job itself). [on `worker`'s thread]
[[nodiscard]] bool push_fork(fork_worker& worker, pool_job* job) noexcept;

/// The newest job of `worker`'s deque, or null. [on `worker`'s thread]
[[nodiscard]] pool_job* pop_fork(fork_worker& worker) noexcept;

/// Runs a job taken with pop_fork() (not the caller's own), counted as the worker's.
/// [on `worker`'s thread]
void run_fork(fork_worker& worker, pool_job* job) noexcept;

/// Runs other tasks of `worker`'s pool (own deque first, then the shared queue, then stolen
/// ones) until target.done(); with nothing to run it yields a few times, then parks for 20 µs
/// growing to 1 ms between looks. [on `worker`'s thread]
void help_until(fork_worker& worker, help_target& target) noexcept;

/// help_until() on the calling thread's worker; false (nothing done) on a thread that is no
/// pool worker. [any thread]
[[nodiscard]] bool help_if_worker(help_target& target) noexcept;

/// A word that one side marks done and the other waits for, with a futex: done() is one
/// acquire load, mark_done() one RMW (and a wake syscall only when someone parks). The marking
/// side touches the object only with that RMW, and then passes its address to the wake (which
/// reads no memory), so the waiter may destroy it as soon as done() is true.
class completion_word {
 public:
  [[nodiscard]] bool done() const noexcept {
    // acquire: pairs with mark_done()'s release.
    return (word_.load(std::memory_order_acquire) & kDone) != 0;
  }
  /// [the completing side, once]
  void mark_done() noexcept;
  /// Sleeps until done or `timeout` (negative: unbounded); may return spuriously. [waiter]
  void park(std::chrono::nanoseconds timeout) noexcept;

 private:
  static constexpr std::uint32_t kDone = 1;
  static constexpr std::uint32_t kWaiting = 2;
  std::atomic<std::uint32_t> word_{ 0 };
};

/// Futex helpers for the fork-join words (join.cpp). `timeout` negative: unbounded.
void futex_wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                    std::chrono::nanoseconds timeout) noexcept;
void futex_wake_every(std::atomic<std::uint32_t>& word) noexcept;

}  // namespace cyan::dispatch::detail
