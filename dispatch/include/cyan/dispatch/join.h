#pragma once

// Fork-join on a thread_pool: join(), task_group, parallel_for() (docs/design/scheduler.md).

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <exception>
#include <type_traits>
#include <utility>

#include "cyan/dispatch/async.h"
#include "cyan/dispatch/detail/join_job.h"
#include "cyan/dispatch/thread_pool.h"

namespace cyan::dispatch {

namespace detail {

/// The calling thread's worker if it is one of `pool`'s, else null.
[[nodiscard]] inline fork_worker* worker_of(thread_pool& pool) noexcept {
  fork_worker* worker = this_thread_worker;
  return worker != nullptr && worker->pool == executor_access::ref(pool).target ? worker : nullptr;
}

/// What join(f, g) returns for results A and B: void halves contribute no member.
template <typename A, typename B>
using join_result_t = std::conditional_t<std::is_void_v<A>, B,
                                         std::conditional_t<std::is_void_v<B>, A, std::pair<A, B>>>;

template <typename A, typename B>
join_result_t<A, B> join_results(outcome<A>& a, outcome<B>& b, int first) {
  if (first == 2) {
    b.take();  // rethrows g's exception, thrown first
  }
  if constexpr (std::is_void_v<A> && std::is_void_v<B>) {
    a.take();
    b.take();
  } else if constexpr (std::is_void_v<A>) {
    a.take();
    return b.take();
  } else if constexpr (std::is_void_v<B>) {
    A value = a.take();
    b.take();
    return value;
  } else {
    A left = a.take();
    return std::pair<A, B>(std::move(left), b.take());
  }
}

// join() on one of pool's workers (see join()).
template <typename F, typename G>
auto join_on_worker(fork_worker& worker, F& f, G& g)
    -> join_result_t<std::invoke_result_t<F&>, std::invoke_result_t<G&>> {
  using B = std::invoke_result_t<G&>;
  first_failure failure;
  join_job<F> forked(f, failure);
  const bool offered = push_fork(worker, &forked);
  if (!offered) {
    forked.run();  // the deque is full: no fork
  }
  outcome<B> inline_result;
  auto call = [&g]() -> B { return g(); };
  inline_result.set_result_of(call);
  if (inline_result.has_error()) {
    failure.claim(2);
  }
  if (offered) {
    // Take f back, running what g left above it; if a thief has it, help until it is done.
    for (;;) {
      pool_job* top = forked.done() ? nullptr : pop_fork(worker);
      if (top == &forked) {
        run_fork(worker, top);  // counted as a task from the worker's own deque
        break;
      }
      if (top == nullptr) {
        help_until(worker, forked);
        break;
      }
      run_fork(worker, top);
    }
  }
  return join_results(forked.result(), inline_result, failure.side());
}

}  // namespace detail

/// Runs `f()` and `g()`, possibly in parallel, and returns both results once both finished:
/// `std::pair{f(), g()}`; when one returns void, just the other's result; when both do, void.
/// On one of `pool`'s workers, `f` is offered to idle workers (pushed on this worker's deque)
/// while `g` runs inline; if no one took `f`, it then runs inline too, else the caller runs
/// other tasks of the pool until the thief finished it (see thread_pool: the lock rule). On any
/// other thread the whole join is posted to `pool` and the caller blocks until it is done.
/// `f` and `g` are called as lvalues and are not copied.
///
/// Throws: after both halves finished, the first exception one of them threw (by time; the
/// other's is dropped); executor_stopped when called off the pool after its stop();
/// std::bad_alloc. [any thread]
template <typename F, typename G>
requires std::invocable<F&> && std::invocable<G&>
auto join(thread_pool& pool, F&& f, G&& g)
    -> detail::join_result_t<std::invoke_result_t<F&>, std::invoke_result_t<G&>> {
  if (detail::fork_worker* worker = detail::worker_of(pool)) {
    return detail::join_on_worker(*worker, f, g);
  }
  return pool.post_awaitable([&pool, &f, &g] { return join(pool, f, g); }).get();
}

/// join() on the global pool (global_concurrent_pool()).
template <typename F, typename G>
requires std::invocable<F&> && std::invocable<G&>
auto join(F&& f, G&& g) {
  return join(global_concurrent_pool(), f, g);
}

/// A set of tasks run on a pool and waited for together (oneTBB's task_group). run(f) posts
/// `f` (to the calling worker's deque when called on one of the pool's workers, so a thief or
/// the waiting worker itself runs it); wait() waits for every task run so far and rethrows the
/// first exception one of them threw. The first exception cancels the group: tasks not started
/// yet are skipped. The group may be reused after wait().
///
/// Thread safety: run() and cancel() [any thread, also from the group's own tasks]; wait() on
/// one thread at a time. The destructor waits (as wait(), without throwing: an exception left
/// goes to the pool's error callback).
class task_group : noncopyable {
 public:
  /// A group on `pool` (the global pool by default). [any thread]
  explicit task_group(thread_pool& pool = global_concurrent_pool()) noexcept : pool_(&pool) {}

  ~task_group() {
    wait_for_children();
    if (std::exception_ptr error = state_.reset()) {
      detail::executor_access::report(*pool_, std::move(error));
    }
  }

  /// Posts `f()` as one of the group's tasks. A task the pool drops (stop(discard)) or refuses
  /// counts as finished with task_cancelled. Throws executor_stopped after the pool's stop()
  /// (the task then counts as cancelled as well), std::bad_alloc.
  template <typename F>
  requires std::invocable < std::decay_t<F>
  & > void run(F&& f) {
    state_.child_started();
    pool_->post(detail::group_child<std::decay_t<F>>(state_, std::forward<F>(f)));
  }

  /// Waits until every task run() so far finished. On one of the pool's workers it runs other
  /// tasks of the pool meanwhile (see thread_pool: the lock rule); elsewhere it blocks. Then
  /// rethrows the first exception a task threw (task_cancelled for a dropped task), once, and
  /// clears the cancellation.
  void wait() {
    wait_for_children();
    if (std::exception_ptr error = state_.reset()) {
      std::rethrow_exception(error);
    }
  }

  /// Tasks of the group that have not started yet will not run (each counts as finished, with
  /// no exception); those running finish. Until wait() returns. [any thread]
  void cancel() noexcept { state_.cancel(); }

  /// Whether cancel() (or a task's exception) cancelled the group since the last wait().
  [[nodiscard]] bool is_canceling() const noexcept { return state_.cancelled(); }

 private:
  void wait_for_children() noexcept {
    if (state_.done()) {
      return;
    }
    if (detail::help_if_worker(state_)) {
      return;
    }
    while (!state_.done()) {
      state_.park(std::chrono::nanoseconds(-1));
    }
  }

  thread_pool* pool_;
  detail::group_state state_;
};

namespace detail {

template <typename I, typename F>
void parallel_for_range(thread_pool& pool, I first, I last, F& f, std::size_t grain,
                        std::atomic<bool>& failed) {
  if (failed.load(std::memory_order_relaxed)) {  // a hint: stop splitting after a failure
    return;
  }
  if (static_cast<std::size_t>(last - first) <= grain) {
    try {
      for (I i = first; i != last; ++i) {
        f(i);
      }
    } catch (...) {
      failed.store(true, std::memory_order_relaxed);
      throw;
    }
    return;
  }
  const I middle = first + (last - first) / 2;
  (void)join(
      pool, [&] { parallel_for_range(pool, first, middle, f, grain, failed); },
      [&] { parallel_for_range(pool, middle, last, f, grain, failed); });
}

}  // namespace detail

/// Calls `f(i)` for every i in [first, last) (none when first >= last), spread over `pool`'s
/// workers by recursive halving with join() down to ranges of `grain` indexes (0: about eight
/// ranges per worker). Returns once every started call returned. [any thread]
///
/// Throws: the first exception a call threw, after the started ones finished (ranges not
/// started then are skipped); executor_stopped off the pool after its stop(); std::bad_alloc.
template <std::integral I, typename F>
requires std::invocable<F&, I>
void parallel_for(thread_pool& pool, I first, I last, F&& f, std::size_t grain = 0) {
  if (!(first < last)) {
    return;
  }
  const auto count = static_cast<std::size_t>(last - first);
  if (grain == 0) {
    grain = std::max<std::size_t>(1, count / (8 * pool.size()));
  }
  std::atomic<bool> failed{ false };
  detail::parallel_for_range(pool, first, last, f, grain, failed);
}

/// parallel_for() on the global pool.
template <std::integral I, typename F>
requires std::invocable<F&, I>
void parallel_for(I first, I last, F&& f, std::size_t grain = 0) {
  parallel_for(global_concurrent_pool(), first, last, f, grain);
}

}  // namespace cyan::dispatch
