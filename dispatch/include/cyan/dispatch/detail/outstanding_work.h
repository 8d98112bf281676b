#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <utility>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/dispatch/detail/serial_tracker.h"
#include "cyan/dispatch/detail/spawn_registry.h"

namespace cyan::dispatch::detail {

/// An executor's account of the work it accepted that is not in its queue (yet), and the one
/// rule that says when a stopping executor has drained it. handler_thread and thread_pool each
/// own one (as Asio's scheduler owns outstanding_work_). Every member is [any thread].
///
/// Stop, in phases (the executor's own steps in brackets):
///   1. stop:    stopping(): from now on a count below that drops to zero calls the executor's
///               `on_drop`, and token tasks for the executor go through its poster (no inline
///               runs: a discard cancels them too); [then the executor refuses plain posts:
///               handler_thread's inbox sets kStopped, thread_pool seals its queue; a discard
///               also abandons the spawned tasks, whose next resumption drops them].
///   2. serve:   [the executor goes on running (or cancelling) its queue, timers and
///               hand-overs, sleeping while idle] as long as drained() is false.
///   3. finish:  once drained() read true: [the executor closes its queue to hand-overs too,
///               atomically with its last look at it (inbox::finish(), task_queue::
///               close_if_empty()), and runs (drain) or cancels (discard) what is left in it].
///
/// The counts, in the order drained() reads them:
///   - posts:    work between the executor's check of its stop and the moment it is counted
///               elsewhere or queued (work_started() / work_finished()): a post(token, f) from
///               before its check to the end of its submit (its task is then in `tokens`), a
///               pool's delayed task from before its check until the timer thread queued it or
///               destroyed it unrun;
///   - tokens:   tasks that serial tokens hold for the executor, not handed over yet
///               (serial_tracker: counted before the token's push, dropped after the hand-over's
///               push into the executor's queue);
///   - spawned:  tasks co_spawn started here and that have not finished (spawn_registry: their
///               resumptions are hand-overs).
///
/// Why drained() means no hand-over can come any more: work only moves down this list and then
/// into the executor's queue, and each move adds to the next place before it drops from the
/// previous one (seq_cst on both sides). A post that passed its check is counted in `posts`
/// until its task is counted in `tokens`; one that comes later sees the stop and throws (the
/// stop and the check are seq_cst, and so is work_started(), which precedes the check). So read
/// in this order, once each count read zero, nothing counted later in the list can have come
/// from one read earlier; work that came after the stop was refused. `spawned` is last only by
/// convention: after the stop nothing moves into it or out of it into the others (a co_spawn or
/// a token post on a stopped executor is refused). What is in the queue then is either seen by
/// the executor's closing look, or refused by the close (a hand-over's push that came later).
///
/// No lost wake-up: whoever makes a count zero after stopping() calls `on_drop(context)`
/// (handler_thread: inbox::notify(), so the thread can sleep while it waits; thread_pool:
/// try_finish()). A drop that read `stopping_` false is ordered, in the seq_cst total order,
/// before stopping()'s store, so the executor's first look at drained() after its stop (the
/// thread's sleep check, thread_pool::stop()'s try_finish()) sees it.
///
/// Declare it after every member the executor's poster uses: its destructor waits (for token
/// tasks to be handed over and for on_drop calls to return), so it must run before theirs.
class outstanding_work : noncopyable {
 public:
  using callback = void (*)(void* context) noexcept;

  /// `on_drop(context)` runs whenever a count drops to zero after stopping() (on the thread that
  /// dropped it); it must not throw. `on_token_error(context, error)` receives what a token
  /// task's destructor threw (see serial_tracker::error_sink).
  outstanding_work(callback on_drop, void* context,
                   serial_tracker::error_sink on_token_error) noexcept
      : on_drop_(on_drop), on_token_error_(on_token_error), context_(context) {}

  /// Counts one piece of work: before the check of the executor's stop.
  void work_started() noexcept {
    // seq_cst: precedes the check of the stop; drained() reads it before the tokens' count.
    posts_.value.fetch_add(1, std::memory_order_seq_cst);
  }

  /// The work is counted elsewhere (a token's tracker), queued, or destroyed.
  void work_finished() noexcept {
    // seq_cst: after the push or the tracker's count; the load of stopping_ pairs with
    // stopping()'s store (see "No lost wake-up" above).
    if (posts_.value.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        posts_.stopping.load(std::memory_order_seq_cst)) {
      on_drop_(context_);
    }
  }

  /// work_started() for a scope: a post(token, f) from before its stop check to the end of its
  /// submit.
  class scope {
   public:
    explicit scope(outstanding_work& work) noexcept : work_(work) { work_.work_started(); }
    ~scope() { work_.work_finished(); }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    outstanding_work& work_;
  };

  /// Phase 1 of the stop (see above); before the executor refuses its posts. Idempotent.
  void stopping() noexcept {
    tokens_.stopping();
    posts_.stopping.store(true, std::memory_order_seq_cst);  // pairs with the drops' loads
  }

  /// Whether nothing accepted can reach the executor's queue any more (see above): the counts
  /// read in order, seq_cst. Meaningful after stopping().
  [[nodiscard]] bool drained() const noexcept {
    return posts_.value.load(std::memory_order_seq_cst) == 0 && tokens_.released() &&
           spawned_.empty();
  }

  /// The tracker that serial_access::submit() counts this executor's token tasks in.
  [[nodiscard]] serial_tracker& tokens() noexcept { return tokens_; }
  /// The executor's co_spawn tasks (executor_access::registry()).
  [[nodiscard]] spawn_registry& spawned() noexcept { return spawned_; }

 private:
  static void tokens_released(void* self) noexcept {
    auto* work = static_cast<outstanding_work*>(self);
    work->on_drop_(work->context_);  // the tracker calls only after stopping()
  }
  static void spawned_empty(void* self) noexcept {
    auto* work = static_cast<outstanding_work*>(self);
    // seq_cst: pairs with stopping()'s store, as in work_finished().
    if (work->posts_.stopping.load(std::memory_order_seq_cst)) {
      work->on_drop_(work->context_);
    }
  }
  static bool token_error(void* self, std::exception_ptr error) noexcept {
    auto* work = static_cast<outstanding_work*>(self);
    return work->on_token_error_(work->context_, std::move(error));
  }

  const callback on_drop_;
  const serial_tracker::error_sink on_token_error_;
  void* const context_;
  // Written by posting threads (and stopping()); one line, so a drop reads the flag it needs
  // from the line it has just written.
  struct alignas(cache_line_size) posts_line {
    std::atomic<std::uint64_t> value{ 0 };
    std::atomic<bool> stopping{ false };
  } posts_;
  // Destroyed after spawned_: it waits until no token holds a task for the executor (and its
  // on_released call has returned).
  serial_tracker tokens_{ &tokens_released, this, &token_error };
  // Destroyed first: it waits for a leave() still calling on_drop.
  spawn_registry spawned_{ &spawned_empty, this };
};

}  // namespace cyan::dispatch::detail
