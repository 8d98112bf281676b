#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cyan/common/detail/saturating_time.h"
#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/dispatch/detail/schedule_awaiter.h"
#include "cyan/dispatch/detail/spawn_registry.h"
#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/future.h"
#include "cyan/dispatch/serial_token.h"
#include "cyan/dispatch/stop_mode.h"

namespace cyan::dispatch {

namespace detail {
class pool_core;
}  // namespace detail

/// How a thread_pool is set up.
struct thread_pool_options {
  /// Worker threads are named "<name>-<index>" (Linux keeps 15 bytes of a thread name).
  std::string name = "cyan-pool";
  /// Receives what a fire-and-forget task (post(f), post(token, f), post(f, delay)) threw, or
  /// its closure's destructor (when the pool destroys it, after it ran or unrun at stop).
  /// Called on the worker that ran the task, possibly on several workers at once; must not
  /// throw. Empty: print the exception on stderr. Awaitable tasks report to their future.
  std::function<void(std::exception_ptr)> on_error;
};

/// One worker's counters, as thread_pool::stats() reads them: each counts since the pool
/// started, written by that worker alone with relaxed stores (taken_by_thieves: by the thieves),
/// so a snapshot taken while the pool runs is a little stale but never torn.
struct thread_pool_worker_stats {
  /// Tasks it ran from its own local deque (what tasks on it forked or posted) and from its
  /// own batch claim (the tasks a claim took from the shared queue beyond the first).
  std::uint64_t from_local = 0;
  /// Tasks it claimed from the shared injection queue (posts from outside the pool, due delayed
  /// tasks, hand-overs from outside).
  std::uint64_t from_injection = 0;
  /// Tasks it stole: from another worker's deque, batch claim or next-task slot.
  std::uint64_t stolen = 0;
  /// Tasks other workers stole from this worker's deque, batch claim or next-task slot.
  std::uint64_t taken_by_thieves = 0;
  /// Tasks it ran from its own next-task slot (a wake-up a task on it caused).
  std::uint64_t next_task_hits = 0;
  /// Times it found no work anywhere and went idle (it then sleeps unless woken at once).
  std::uint64_t parks = 0;
  /// Spins (polls of the queues before going idle) that found work, and that found none.
  std::uint64_t spins_found_work = 0;
  std::uint64_t spins_found_nothing = 0;
};

/// A fixed set of worker threads (handler_threads) with work stealing: tasks posted from outside
/// the pool go to one shared lock-free injection queue; tasks posted (or forked with join(),
/// task_group, co_spawn, schedule()) from a task running on one of the workers go to that
/// worker's local deque, which it pops newest-first with no shared read-modify-write, and from
/// which idle workers steal oldest-first. So uneven work stays balanced, and fork-join stays
/// on the core that forked it. A worker that meets a backlog in the shared queue claims a few
/// tasks at once, and an idle worker steals from such a claim too. See
/// docs/design/scheduler.md.
///
/// Waits that help: future::get()/wait(), join(), task_group::wait() on one of the workers run
/// other tasks of this pool until the awaited work is done, so nested waits cannot deadlock the
/// pool. The one rule this brings: a task that holds a lock across such a wait may run another
/// task that wants the same lock (a deadlock with a non-recursive mutex). Release locks before
/// waiting.
///
/// Thread safety: every member is [any thread], except join() and the destructor, which must
/// not run on one of the pool's own workers.
///
/// Work: posting from outside is one CAS on the queue's tail and costs no allocation for a
/// closure that fits unique_function's inline buffer; posting from a pool task is a push on the
/// worker's deque (one small block from the frame pool). Idle workers spin briefly, then sleep
/// (no CPU used); a post wakes one sleeping worker when no worker is searching, and costs no
/// syscall while the workers are busy. Posts from outside start in roughly post order, posts
/// from one task newest first on that worker (oldest first when stolen); use a serial_token
/// when order matters.
///
/// Stop: explicit. stop() refuses new posts (they throw executor_stopped) and returns at once;
/// drain runs every task already posted (token tasks included), discard cancels those not
/// started (awaitables report task_cancelled). Delayed tasks not yet due at the end are
/// cancelled. join() waits for the workers; the destructor does stop(drain) then join().
class thread_pool : noncopyable {
 public:
  using options = thread_pool_options;
  using clock = std::chrono::steady_clock;

  /// Starts `threads` workers (at least 1; hardware_concurrency() by default). Throws
  /// std::invalid_argument for 0 threads, std::system_error when a thread cannot start.
  explicit thread_pool(std::size_t threads = default_size(), options opts = {});

  /// stop(stop_mode::drain), then join(). Aborts with a message on one of the pool's workers.
  ~thread_pool();

  /// Runs `f()` on some worker. What it throws goes to the error callback. Throws
  /// executor_stopped after stop(), std::bad_alloc.
  template <typename F>
  requires std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>>
  void post(F&& f) { post_task(unique_function<void()>(std::forward<F>(f))); }

  /// Runs `f()` on some worker once `delay` has passed; cancelled (destroyed unrun) if the pool
  /// stops first. Throws like post().
  template <typename F, typename Rep, typename Period>
  requires std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>>
  void post(F&& f, std::chrono::duration<Rep, Period> delay) {
    post_task_after(unique_function<void()>(std::forward<F>(f)), clamp(delay));
  }

  /// Runs `f()` on some worker after every earlier task of `token` finished, and before any
  /// later one starts (see serial_token). Throws like post().
  template <typename F>
  requires std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>>
  void post(const serial_token& token, F&& f) {
    post_serial(token, unique_function<void()>(std::forward<F>(f)));
  }

  /// Runs `f()` on some worker and returns the future of its result (or of what it threw;
  /// task_cancelled when it never runs). One block from the frame pool (no malloc once warmed
  /// up). Throws like post().
  template <typename F>
  requires std::invocable<std::decay_t<F>>
  [[nodiscard]] auto post_awaitable(F&& f) -> future<detail::task_result_t<F>> {
    auto [result, job] = detail::package(std::forward<F>(f));
    post_task(std::move(job));
    return std::move(result);
  }

  /// post_awaitable() once `delay` has passed; task_cancelled if the pool stops first.
  template <typename F, typename Rep, typename Period>
  requires std::invocable<std::decay_t<F>>
  [[nodiscard]] auto post_awaitable(F&& f, std::chrono::duration<Rep, Period> delay)
      -> future<detail::task_result_t<F>> {
    auto [result, job] = detail::package(std::forward<F>(f));
    post_task_after(std::move(job), clamp(delay));
    return std::move(result);
  }

  /// post_awaitable() in `token`'s order (see post(token, f)).
  template <typename F>
  requires std::invocable<std::decay_t<F>>
  [[nodiscard]] auto post_awaitable(const serial_token& token, F&& f)
      -> future<detail::task_result_t<F>> {
    auto [result, job] = detail::package(std::forward<F>(f));
    post_serial(token, std::move(job));
    return std::move(result);
  }

  /// `co_await pool.schedule()` moves the calling cyan::dispatch::task to one of this pool's
  /// workers; the pool is its home from then on (it resumes on any of the workers after a
  /// suspension). See cyan::dispatch::schedule.
  [[nodiscard]] detail::schedule_awaiter schedule() noexcept {
    return detail::schedule_awaiter(detail::executor_access::ref(*this));
  }

  /// Refuses new posts and lets the workers finish (see stop_mode) without waiting for them.
  /// Only the first call's mode counts, except that discard after drain still discards what
  /// has not started. May be called from a task. Never throws.
  void stop(stop_mode mode = stop_mode::drain) noexcept;

  /// Waits until every worker has finished. Needs a stop() first, or it waits forever. Throws
  /// std::system_error (resource_deadlock_would_occur) on one of the pool's workers.
  void join();

  /// The number of workers.
  [[nodiscard]] std::size_t size() const noexcept;

  /// Whether the calling thread is one of this pool's workers.
  [[nodiscard]] bool is_current() const noexcept;

  /// Replaces the error callback (see thread_pool_options::on_error; empty: stderr).
  void set_error_callback(std::function<void(std::exception_ptr)> on_error);

  /// One entry per worker, in worker order: its counters since the pool started (see
  /// thread_pool_worker_stats). Throws std::bad_alloc.
  [[nodiscard]] std::vector<thread_pool_worker_stats> stats() const;

  /// hardware_concurrency(), or 1 when it is unknown.
  [[nodiscard]] static std::size_t default_size() noexcept;

 private:
  friend struct detail::executor_access;

  // A delay as the clock's duration, saturating (a delay the clock cannot hold never comes).
  template <typename Rep, typename Period>
  static clock::duration clamp(std::chrono::duration<Rep, Period> delay) {
    return cyan::detail::saturating_ceil<clock::duration>(delay);
  }

  void post_task(unique_function<void()>&& task);
  void post_task_after(unique_function<void()>&& task, clock::duration delay);
  void post_serial(const serial_token& token, unique_function<void()>&& task);

  std::unique_ptr<detail::pool_core> core_;
};

}  // namespace cyan::dispatch
