#pragma once

// The shared state of a serial_token: a lock-free queue of the token's tasks and a count of
// unfinished ones. Exactly one task at a time holds the token's "turn": it is handed to its
// executor as a step job; when the step finishes (or is destroyed unrun) it hands the turn to
// the next queued task. Whoever moves the count from 0 to 1 starts the chain.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/lockfree/queue.h"

namespace cyan::dispatch::detail {

/// Hands a token's step job to an executor (see serial_access::submit).
using serial_poster = unique_function<void(unique_function<void()>)>;

/// Counts an executor's tasks still held by serial tokens (queued, not yet handed over), so the
/// executor is not destroyed while a token may still call its poster. Declare it after every
/// member the poster uses: its destructor waits, so it must run before theirs. [any thread]
class serial_tracker : noncopyable {
 public:
  using callback = void (*)(void* context) noexcept;

  /// `on_released(context)`, when given, runs each time the count drops to zero (on the thread
  /// that handed over or cancelled the last task), e.g. to let a stopping executor finish.
  explicit serial_tracker(callback on_released = nullptr, void* context = nullptr) noexcept
      : on_released_(on_released), context_(context) {}
  /// Waits until every token task of the executor was handed over or cancelled, and every
  /// on_released call has returned.
  ~serial_tracker() { wait_released(); }

  /// Blocks until no token holds a task for the executor and no on_released call runs.
  void wait_released();

  /// Whether no token holds a task for the executor now.
  [[nodiscard]] bool released();

 private:
  friend class serial_state;
  void add();
  void remove();

  const callback on_released_;
  void* const context_;
  // Guarded by mutex_ (not atomics): remove() must finish with the tracker before
  // wait_released() can see zero and let it be destroyed.
  std::mutex mutex_;
  std::condition_variable released_;
  std::uint64_t parked_ = 0;
  std::uint32_t notifying_ = 0;  // on_released calls in progress
};

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

  // Hands the turn to the next queued task (count_ > 0), through its executor's poster.
  void hand_over_next() noexcept;
  // Called once per task when it finished or was cancelled.
  void finish_one() noexcept;
  // Runs state->hand_over_next() now, or after the one already running on this thread; then
  // drops a reference the caller took.
  static void schedule_hand_over(serial_state* state) noexcept;

  lockfree::queue<item> queue_;
  // Tasks submitted and not finished: queued, handed over, or running.
  std::atomic<std::size_t> count_{ 0 };
  std::atomic<std::uint32_t> references_{ 1 };
  // The task holding the turn. Written by whoever hands the turn over, read by its step; the
  // executor's post orders the two.
  unique_function<void()> current_;
  // Link in the calling thread's list of tokens whose hand-over was deferred (see the .cpp).
  serial_state* deferred_next_ = nullptr;
};

}  // namespace cyan::dispatch::detail
