#pragma once

// The shared state of a serial_token: a lock-free queue of the token's tasks and a count of
// unfinished ones. Exactly one task at a time holds the token's "turn": it is handed to its
// executor inside a step job. When the step has run it, the step takes the next task: it runs
// it inline when it belongs to the same executor (a bounded batch), or hands it to its own
// executor; a step destroyed unrun cancels its task and hands the turn on the same way. Whoever
// moves the count from 0 to 1 starts the chain.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/dispatch/detail/serial_tracker.h"
#include "cyan/lockfree/queue.h"

namespace cyan::dispatch::detail {

/// Hands a token's step job to an executor (see serial_access::submit).
using serial_poster = unique_function<void(unique_function<void()>)>;

/// A serial_token's shared state. Reference counted: by each token copy and by the step job
/// that holds the turn.
class serial_state : noncopyable {
 public:
  void retain() noexcept {
    // relaxed: a new reference is made from an existing one, which already orders access.
    references_.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    // acq_rel: the release orders this owner's accesses before the deletion; the acquire in the
    // last owner's decrement pairs with the other owners' release decrements.
    if (references_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete this;
    }
  }

  [[nodiscard]] std::size_t pending() const noexcept {
    return count_.load(std::memory_order_relaxed);  // a snapshot: orders nothing
  }

  /// See serial_access::submit().
  void submit(unique_function<void()> task, serial_poster poster, serial_tracker* tracker);

 private:
  class step;
  struct item {
    unique_function<void()> task;
    serial_poster poster;
    serial_tracker* tracker = nullptr;
  };

  // Runs and destroys the current task; on an exception (from the task or its destructor),
  // passes the turn on and drops the step's reference before it propagates. `here` is the
  // running step's executor (see serial_tracker::report()).
  void run_current(const serial_tracker* here);
  // Called once per task when it finished or was cancelled: passes the turn on if tasks wait.
  void finish_one() noexcept;
  // Counts the current task finished; if more wait, makes the next one current and returns
  // true (the caller then runs or posts it), else returns false (the token is idle).
  [[nodiscard]] bool advance() noexcept;
  // Makes the next queued task (count_ > 0) the current one.
  void take_next() noexcept;
  // Hands the current task's step to its executor.
  void post_current() noexcept;
  // Runs state->post_current() now, or after the one already running on this thread; then
  // drops a reference the caller took.
  static void schedule_post(serial_state* state) noexcept;

  lockfree::queue<item> queue_;
  // Tasks submitted and not finished: queued, current, or running.
  std::atomic<std::size_t> count_{ 0 };
  std::atomic<std::uint32_t> references_{ 1 };
  // The task holding the turn. Written by whoever passes the turn, read by its step; the
  // executor's post orders the two.
  item current_;
  // Link in the calling thread's list of tokens whose post was deferred (see the .cpp).
  serial_state* deferred_next_ = nullptr;
};

}  // namespace cyan::dispatch::detail
