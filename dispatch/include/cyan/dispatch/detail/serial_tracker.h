#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>

#include "cyan/common/noncopyable.h"

namespace cyan::dispatch::detail {

/// An executor's account of its tasks that serial tokens still hold (queued in a token, not yet
/// handed over), so that the executor is not destroyed while a token may still call its poster,
/// and so that a stopping executor learns when the last one arrives. Every executor that takes
/// token tasks (thread_pool, handler_thread) owns one and passes it to serial_access::submit();
/// it also identifies the executor: a token runs its next task inline, in the step that ran the
/// previous one, when both went to the same tracker and the executor is not stopping. And it
/// leads to the executor's error path, for what the destructor of one of its token tasks throws.
///
/// Declare it after every member the executor's poster uses: its destructor waits, so it must
/// run before theirs. Counting is lock-free; the mutex is only taken when the count drops to
/// zero while someone watches (stopping() was called, or the destructor waits). [any thread]
class serial_tracker : noncopyable {
 public:
  using callback = void (*)(void* context) noexcept;
  /// Takes an exception to the executor's error path; returns false when it cannot here (then
  /// report() prints it on stderr).
  using error_sink = bool (*)(void* context, std::exception_ptr error) noexcept;

  /// `on_released(context)`, when given, runs each time the count drops to zero after
  /// stopping() was called, on the thread that handed over or cancelled the last task.
  /// `on_error(context, error)`, when given, receives what report() is given.
  explicit serial_tracker(callback on_released = nullptr, void* context = nullptr,
                          error_sink on_error = nullptr) noexcept
      : on_released_(on_released), on_error_(on_error), context_(context) {}

  /// Waits until every token task of the executor was handed over or cancelled, and every
  /// on_released call has returned.
  ~serial_tracker() { wait_released(); }

  /// The executor is stopping: from now on its token tasks always go through its poster (no
  /// inline runs), and on_released reports the count dropping to zero.
  void stopping() noexcept;

  /// Blocks until no token holds a task for the executor and no on_released call runs.
  void wait_released();

  /// Whether no token holds a task for the executor now.
  [[nodiscard]] bool released() const noexcept {
    return (state_.load(std::memory_order_seq_cst) >> kCountShift) == 0;
  }

  /// What the destructor of a token task for this executor threw (the task was cancelled, or
  /// had thrown itself): to the error sink, or to stderr when there is none or it declines.
  /// `tracker` may be null (a token task without a tracker): stderr. [any thread]
  static void report(const serial_tracker* tracker, std::exception_ptr error) noexcept;

  /// Whether a token may run the executor's next task inline (see the class comment).
  [[nodiscard]] bool inlining() const noexcept {
    // relaxed: a hint; a late-seen stop lets one more task run inline, as if posted earlier.
    return (state_.load(std::memory_order_relaxed) & kWatched) == 0;
  }

 private:
  friend class serial_state;

  // state_: bit 0 kWatched; bits 1–16 on_released calls in progress; above, the count.
  static constexpr std::uint64_t kWatched = 1;
  static constexpr std::uint64_t kCallOne = 2;
  static constexpr std::uint64_t kCallMask = 0x1FFFE;
  static constexpr unsigned kCountShift = 17;
  static constexpr std::uint64_t kCountOne = std::uint64_t{ 1 } << kCountShift;

  void add() noexcept {
    // seq_cst: ordered before the token's push (see "Stop" in outstanding_work.h).
    state_.fetch_add(kCountOne, std::memory_order_seq_cst);
  }
  void remove() noexcept;

  const callback on_released_;
  const error_sink on_error_;
  void* const context_;
  std::atomic<std::uint64_t> state_{ 0 };
  // The slow path: the last on_released call's end and the waiter meet under mutex_, so the
  // remover is done with the tracker before the waiter can see it idle and destroy it.
  std::mutex mutex_;
  std::condition_variable idle_;
};

}  // namespace cyan::dispatch::detail
