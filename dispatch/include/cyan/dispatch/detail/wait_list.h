#pragma once

// The waiting half of cyan's coroutine synchronisation primitives (async_mutex, async_semaphore,
// async_event, async_latch, channel): a FIFO list of suspended coroutines behind a spin lock, and
// the awaiter base every primitive's awaiter derives from.
//
// A primitive keeps its fast path in its own atomic word (no lock, no system call) and comes
// here only to wait. Whoever gives a waiter what it waits for (a unit, the lock, an item, the
// event) does so under the list's lock and marks it granted; a stop request removes a waiter
// under the same lock and marks it cancelled. So a hand-off and a cancellation of one waiter are
// ordered by the lock: a waiter either got the thing (and its co_await returns it, even if a
// stop came an instant later) or was cancelled (and holds nothing): nothing is lost or leaked.
//
// A wait, in phases:
//   admit      a task whose branch is abandoned does not wait (its drop is posted); one whose
//              stop was requested ends at once with operation_canceled.
//   enqueue    under the lock the primitive tries once more (its word may have changed) and
//              otherwise links the waiter, which notes its coroutine, branch and home.
//   watch      the task's stop token gets a callback (which may run at once, on this thread).
//   rendezvous the waker and await_suspend() meet (arrived_): the second goes on with the
//              coroutine, so a grant that comes before await_suspend() returned is no race
//              (when that is await_suspend() and a discard abandoned the task meanwhile, the
//              task is dropped instead: see drop_if_abandoned in coro_env.h).
//   resume     on the waiter's home. When the granting thread is the waiter's own handler
//              thread, the waiter runs at once, inside the granting call (unlock(), release(),
//              set(), a send or a receive), until it next suspends: a hand-off there costs no
//              post (the granting task could not run meanwhile anyway). Such nested runs are
//              bounded (kMaxNestedWakes deep on a thread). On a worker of the waiter's pool
//              the waiter becomes the worker's next task (executor_vtable::resume_next): the
//              granting task goes on at once, the worker runs the waiter when it returns, and
//              an idle worker takes the waiter over if the granting task stays busy. From any
//              other thread the waiter is posted to its home's queue. A coroutine that has no home
//              (a foreign one, or one on a plain thread) runs at once on the granting thread. A
//              stop request always goes through the home's queue.
//   withdraw   the frame destroyed while waiting (or dropped after a grant) unlinks the waiter,
//              or gives back what it was granted (give_back: the primitive passes it on).
//   decline    instead of await_resume(), for a when_any child that lost (detail/join_state.h):
//              the wait ended, but what it got — by a grant, the second try or the fast path —
//              will not be taken, so it is given back the same way.

#include <atomic>
#include <cassert>
#include <coroutine>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stop_token>

#include "cyan/common/detail/backoff.h"
#include "cyan/dispatch/detail/coro_env.h"

namespace cyan::dispatch::detail {

/// A lock for a few instructions' work (linking a waiter, handing one something): spins briefly,
/// then yields, so a holder that was preempted gets the CPU back.
class spin_lock {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      cyan::detail::backoff wait;
      while (locked_.load(std::memory_order_relaxed)) {
        wait.wait();
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{ false };
};

class sync_wait;

/// Waiters granted under a list's lock, in grant order, to be woken after it is released.
class granted_chain {
 public:
  granted_chain() noexcept = default;
  granted_chain(const granted_chain&) = delete;
  granted_chain& operator=(const granted_chain&) = delete;
  ~granted_chain() { wake_all(); }

  /// Adds a waiter that was unlinked and marked granted. [under the lock]
  void add(sync_wait& waiter) noexcept;
  /// Wakes them all, in order. [after unlocking]
  void wake_all() noexcept;

 private:
  sync_wait* head_ = nullptr;
  sync_wait* tail_ = nullptr;
};

/// A primitive's waiters, first come first served, and the lock that guards them (and whatever
/// state of the primitive only waiters touch). Neither copyable nor movable.
class wait_list {
 public:
  /// `emptied` runs under the lock when a stop request or a withdrawal removes the last waiter,
  /// so the primitive can clear its "waiters present" flag; `owner` is passed to it.
  wait_list(void (*emptied)(void* owner) noexcept, void* owner) noexcept
      : emptied_(emptied), owner_(owner) {}
  wait_list(const wait_list&) = delete;
  wait_list& operator=(const wait_list&) = delete;

  spin_lock& lock() noexcept { return lock_; }

  // Under lock():
  [[nodiscard]] bool empty() const noexcept { return head_ == nullptr; }
  [[nodiscard]] sync_wait* front() const noexcept { return head_; }
  void push_back(sync_wait& waiter) noexcept;
  /// How many waiters there are, counting no further than `limit`.
  [[nodiscard]] std::size_t size_up_to(std::size_t limit) const noexcept;
  /// Unlinks the first waiter and marks it granted; the caller wakes it after unlocking.
  sync_wait* grant_front() noexcept;
  /// Unlinks every waiter, marks each granted and adds it to `woken`.
  void grant_all(granted_chain& woken) noexcept;

 private:
  friend class sync_wait;
  void unlink(sync_wait& waiter) noexcept;

  spin_lock lock_;
  sync_wait* head_ = nullptr;
  sync_wait* tail_ = nullptr;
  void (*emptied_)(void* owner) noexcept;
  void* owner_;
};

/// The base of a primitive's awaiter (see the top of this file). Not copyable, and movable only
/// before it is awaited: a waiting awaiter is known by address. The derived awaiter calls suspend()
/// from await_suspend() and finish() from await_resume().
class sync_wait {
 public:
  sync_wait(const sync_wait&) = delete;
  sync_wait& operator=(const sync_wait&) = delete;

  /// Wakes a waiter that grant_front() (or the primitive, under the lock) granted, after the
  /// lock was released: on its home, at once when that is the calling thread's executor (see
  /// "resume" above), else through the home's queue. [any thread]
  void wake() noexcept;

  /// The decline phase (see the top of this file): called in place of await_resume() once the
  /// awaiting coroutine goes on, it gives back whatever the operation got (nothing if it was
  /// cancelled). when_any calls it for an operation child that lost.
  void decline() noexcept {
    if (!finish() && give_back_ != nullptr) {
      give_back_(*this);
    }
  }

 protected:
  /// `give_back` passes on what the operation got when it will not be taken: the waiter was
  /// granted it and destroyed before it resumed (its task dropped), or it is declined. It must
  /// handle every way the operation can complete. Null when there is nothing to give.
  sync_wait(wait_list& list, void (*give_back)(sync_wait& waiter) noexcept) noexcept
      : list_(list), give_back_(give_back) {}
  /// Only before the awaiter is awaited (when_any takes operations by value): a waiting awaiter
  /// is known by address.
  sync_wait(sync_wait&& other) noexcept : list_(other.list_), give_back_(other.give_back_) {
    assert(!other.coroutine_ && other.state_ == state::idle);
  }
  ~sync_wait() { withdraw(); }

  /// What the primitive's second try under the lock found.
  enum class attempt { wait, done };

  /// The admit, enqueue, watch and rendezvous phases. `retry` runs under the lock before the
  /// waiter is linked: it sets the primitive's "waiters present" flag and tries once more,
  /// returning attempt::done when the wait is not needed after all (the derived awaiter noted
  /// its result). Returns await_suspend's answer.
  template <typename Promise, typename Retry>
  bool suspend(std::coroutine_handle<Promise> suspended, Retry&& retry) {
    branch* owner = branch_of(suspended);
    switch (admit(suspended, owner)) {
      case admission::dropped:
        return true;
      case admission::stopped:
        cancelled_ = true;
        return false;
      case admission::wait:
        break;
    }
    coroutine_ = suspended;
    owner_ = owner;
    if constexpr (wants_home<Promise>) {
      home_ = current_executor();
    }
    {
      std::lock_guard guard(list_.lock());
      if (retry() == attempt::done) {
        coroutine_ = nullptr;
        return false;
      }
      list_.push_back(*this);
    }
    if (owner != nullptr && owner->token.stop_possible()) {
      stop_watch_.emplace(owner->token, on_stop{ this });  // may cancel at once
    }
    if (!arrive()) {
      return true;  // the waker (or the stop) resumes it
    }
    // Granted or cancelled before this returned: it goes on here, unless a discard abandoned
    // it meanwhile (a grant is then given back as the frame goes: see withdraw).
    return drop_if_abandoned(suspended, owner);
  }

  /// For await_resume(): waits for a stop callback still running on another thread; returns
  /// whether the wait was cancelled (the derived awaiter then throws operation_canceled).
  [[nodiscard]] bool finish() noexcept {
    resumed_ = true;
    stop_watch_.reset();
    return cancelled_;
  }

  /// The withdraw phase, for a derived destructor that must run it while it is still whole
  /// (its give_back reads it); a later call does nothing.
  void withdraw() noexcept;

 private:
  friend class wait_list;
  friend class granted_chain;
  enum class state : unsigned char { idle, waiting, granted, cancelled };

  struct on_stop {
    sync_wait* self;
    void operator()() const noexcept { self->stop_requested(); }
  };

  // acq_rel: the second to arrive acquires what the first released.
  bool arrive() noexcept { return arrived_.exchange(true, std::memory_order_acq_rel); }
  void stop_requested() noexcept;

  wait_list& list_;
  void (*give_back_)(sync_wait& waiter) noexcept;
  sync_wait* prev_ = nullptr;  // the list's, under its lock
  sync_wait* next_ = nullptr;
  state state_ = state::idle;  // under the list's lock once linked
  bool cancelled_ = false;
  bool resumed_ = false;
  std::coroutine_handle<> coroutine_;
  branch* owner_ = nullptr;
  executor_ref home_;
  std::atomic<bool> arrived_{ false };
  std::optional<std::stop_callback<on_stop>> stop_watch_;
};

}  // namespace cyan::dispatch::detail
