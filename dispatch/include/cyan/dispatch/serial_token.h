#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "cyan/common/unique_function.h"
#include "cyan/dispatch/detail/serial_state.h"

namespace cyan::dispatch {

namespace detail {
struct serial_access;
}  // namespace detail

/// Runs tasks one at a time, in post order: tasks posted with the same token
/// (`async(token, f)`, `thread_pool::post(token, f)`, `handler_thread::post(token, f)`) never
/// overlap, and each starts only after the previous one finished, on whichever thread of its
/// executor is free. No thread blocks, spins or re-enqueues while a token is busy: the task that
/// finishes hands the next one to its executor.
///
/// A token is a copyable handle to shared state: copies are the same token. [any thread]
/// - A task that throws does not block the next one (its exception goes where the executor
///   sends exceptions: the pool's error callback, the handler's on_error(), or the future).
/// - Destroying the last copy of a token while tasks are pending still runs them.
/// - A token may mix executors (a pool and a handler_thread): tasks still never overlap, and
///   each runs on the executor it was posted to. A stop() of that executor covers the task even
///   when its turn comes later (it waits behind another executor's task): drain waits for the
///   turn and runs it, discard cancels it (an awaitable reports task_cancelled); either way the
///   token moves on.
class serial_token {
 public:
  /// A new token with no tasks. Throws std::bad_alloc.
  serial_token() : state_(new detail::serial_state) {}

  serial_token(const serial_token& other) noexcept : state_(other.state_) { state_->retain(); }
  serial_token& operator=(const serial_token& other) noexcept {
    serial_token(other).swap(*this);
    return *this;
  }
  ~serial_token() { state_->release(); }

  /// Tasks posted with this token that have not finished yet (queued or running): a snapshot
  /// that other threads may change at once. A task counts until it has passed the turn on,
  /// a moment after its awaitable became ready. [any thread]
  [[nodiscard]] std::size_t pending() const noexcept { return state_->pending(); }

  void swap(serial_token& other) noexcept { std::swap(state_, other.state_); }

  /// True when both handles refer to the same token.
  friend bool operator==(const serial_token& a, const serial_token& b) noexcept {
    return a.state_ == b.state_;
  }

 private:
  friend struct detail::serial_access;

  // Never null: a token has no empty state (moving copies).
  detail::serial_state* state_;
};

namespace detail {

/// How executors (thread_pool, handler_thread) queue work on a token.
struct serial_access {
  /// Queues `f` on `token`. When its turn comes, `post_step(job)` is called (on the submitting
  /// thread if the token is idle, else on the thread that finished the previous task) to hand
  /// `job` (a unique_function<void()>) to the executor, which must run it once or destroy it
  /// unrun. Running it runs `f` and then hands over the token's next task; destroying it unrun
  /// cancels `f` (destroys it; an awaitable job then reports task_cancelled) and also hands over
  /// the next task. `post_step` may throw (e.g. executor_stopped): that counts as destroying the
  /// job unrun, and the exception goes no further (so an executor refuses a post after its stop
  /// loudly by checking before submit()).
  ///
  /// `tracker`, the executor's serial_tracker, lets the executor wait (in ~serial_tracker)
  /// until no token still holds a task for it, so that `post_step` never runs on a destroyed
  /// executor, and identifies the executor: when a task's step finds that the token's next task
  /// has the same tracker, it runs that one inline (a bounded batch, not while stopping()). An
  /// executor that can be destroyed while tokens live must pass one.
  ///
  /// Throws std::bad_alloc, or what copying/moving `f` or `post_step` throws (nothing queued).
  template <typename F, typename Poster>
  static void submit(const serial_token& token, F&& f, Poster&& post_step,
                     serial_tracker* tracker = nullptr) {
    static_assert(std::is_invocable_v<std::decay_t<F>&>, "a task takes no arguments");
    static_assert(std::is_invocable_v<std::decay_t<Poster>&, unique_function<void()>>,
                  "a poster takes the step job");
    token.state_->submit(unique_function<void()>(std::forward<F>(f)),
                         serial_poster(std::forward<Poster>(post_step)), tracker);
  }
};

}  // namespace detail
}  // namespace cyan::dispatch
