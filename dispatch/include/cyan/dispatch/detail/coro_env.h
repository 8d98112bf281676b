#pragma once

// What cyan's coroutines know about where they run, and how they are resumed there.
//
// Home. Every handler thread (and every worker of a thread_pool) publishes itself in a
// thread-local executor_ref while it runs: a pool worker publishes its pool. When a cyan task
// suspends, the awaiter notes the calling thread's executor, its home; whatever completes the
// awaited operation resumes the task through resume_on(home, ...): inline when the completing
// thread belongs to the home already, otherwise by posting a resume_job (one pointer pair, so
// no allocation) to the home. A thread that is not a handler thread has no home (null): a task
// suspended there resumes on whichever thread completes what it awaits.
//
// Branches. The tasks of one co_spawn form a chain (each awaits the next); a when_all or
// when_any forks the chain into child branches that may be suspended on separate things at the
// same time. A branch knows its stop token (what its suspending operations observe) and its
// root (the spawned task it belongs to). Within one branch exactly one party may resume it at a
// time: the operation it waits on. When that resumption will never happen — the home executor
// refused or discarded the resume_job, or the root was abandoned by stop(discard) — the
// branch is dropped instead: a child branch reports to its when_all/when_any as ended, and the
// root branch destroys the whole chain's frames (every branch has ended by then, so nothing can
// resume any of them) and reports task_cancelled to the spawn's future.

#include <atomic>
#include <coroutine>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "cyan/common/unique_function.h"
#include "cyan/event/detail/coroutine_stop.h"

namespace cyan::dispatch::detail {

/// The executor-specific operations a coroutine needs.
struct executor_vtable {
  /// Queues `job` to run on the executor, as a hand-over: accepted while it drains, destroyed
  /// unrun when it refuses it (it finished, or memory ran out). [any thread]
  void (*resume_later)(void* target, unique_function<void()>&& job) noexcept;
  /// As resume_later, but when the calling thread is one of the executor's pool workers, running
  /// a task, `job` becomes that worker's next task: it runs as soon as the current task returns,
  /// ahead of older queued work, unless an idle worker takes it over after a short grace (see
  /// "The next task" in dispatch/src/pool_worker_round.cpp). For a wake-up the waking task
  /// causes and will most likely make room for (a lock handed over, an item handed on): the
  /// waiter runs on the core whose cache holds what it needs. [any thread]
  void (*resume_next)(void* target, unique_function<void()>&& job) noexcept;
};

/// A handler thread or a thread_pool, compared by identity. Null: no executor.
struct executor_ref {
  void* target = nullptr;
  const executor_vtable* vtable = nullptr;

  explicit operator bool() const noexcept { return target != nullptr; }
  friend bool operator==(executor_ref a, executor_ref b) noexcept { return a.target == b.target; }
};

/// What a handler thread (or pool worker) publishes about itself while it runs.
struct thread_home {
  /// Its coroutines' home (see "Home"): the thread, or for a pool worker its pool.
  executor_ref executor;
  /// The handler thread itself, also on a pool worker: for work that must run on this very
  /// thread's loop.
  executor_ref thread;
};

/// The calling thread's; null refs on a thread that is no executor's. Set by the thread at its
/// start; another thread may read it through a pointer while the thread lives.
inline thread_local thread_home this_thread_home{};

/// The calling thread's executor (see "Home").
[[nodiscard]] inline executor_ref current_executor() noexcept {
  return this_thread_home.executor;
}

/// The spawned task a branch belongs to (co_spawn's state).
class branch_root {
 public:
  /// Whether stop(discard) of the executor it was spawned on gave the task up: its branches
  /// are dropped at their next resumption instead of running. [any thread]
  [[nodiscard]] bool abandoned() const noexcept {
    // acquire: pairs with the release store of the executor's flag (spawn_registry).
    return discarding_->load(std::memory_order_acquire);
  }

 protected:
  explicit branch_root(const std::atomic<bool>& discarding) noexcept : discarding_(&discarding) {}
  ~branch_root() = default;

 private:
  // The executor's flag; the executor outlives every task spawned on it.
  const std::atomic<bool>* discarding_;
};

/// One strand of execution of a spawned task (see "Branches").
class branch {
 public:
  /// What the branch's suspending operations observe.
  std::stop_token token;
  /// The spawned task; null for coroutines driven by hand (no co_spawn).
  branch_root* root = nullptr;

  /// The branch's next resumption will never happen: report it ended (see "Branches").
  /// Called by the one party that would have resumed it. [any thread]
  virtual void drop() noexcept = 0;

  /// Whether the branch must be dropped rather than resumed.
  [[nodiscard]] bool abandoned() const noexcept { return root != nullptr && root->abandoned(); }

 protected:
  branch() = default;
  ~branch() = default;
};

/// The base of every promise of cyan's coroutines (task, the spawn driver, when_all's children):
/// which branch the coroutine runs in. Null for a task awaited by a foreign coroutine.
struct branch_member {
  branch* branch_ = nullptr;
};

template <typename Promise>
inline constexpr bool is_cyan_promise = std::is_base_of_v<branch_member, Promise>;

/// Whether a coroutine with this promise wants to be resumed on its home: cyan's tasks do; a
/// promise of cyan's that does not care where it goes on (the spawn driver, when_all's
/// children) says `static constexpr bool any_thread = true;`.
template <typename Promise>
concept any_thread_promise = Promise::any_thread;

template <typename Promise>
inline constexpr bool wants_home = is_cyan_promise<Promise> && !any_thread_promise<Promise>;

/// The branch of the coroutine `h` if it is one of cyan's, else null.
template <typename Promise>
[[nodiscard]] branch* branch_of(std::coroutine_handle<Promise> h) noexcept {
  if constexpr (is_cyan_promise<Promise>) {
    return h.promise().branch_;
  } else {
    return nullptr;
  }
}

/// Resumes a suspended coroutine on its home; what resume_on() posts. Run, it resumes the
/// coroutine (or drops its branch if that was abandoned meanwhile); destroyed unrun, it drops
/// the branch — or, for a coroutine that belongs to no spawned task, resumes it right there,
/// since no one else could.
class resume_job {
 public:
  resume_job(std::coroutine_handle<> coroutine, branch* owner) noexcept
      : coroutine_(coroutine), branch_(owner) {}
  resume_job(resume_job&& other) noexcept
      : coroutine_(std::exchange(other.coroutine_, nullptr)), branch_(other.branch_) {}
  resume_job& operator=(resume_job&&) = delete;
  ~resume_job() {
    if (coroutine_) {
      if (branch_ != nullptr && branch_->root != nullptr) {
        branch_->drop();
      } else {
        coroutine_.resume();
      }
    }
  }

  void operator()() noexcept {
    const std::coroutine_handle<> coroutine = std::exchange(coroutine_, nullptr);
    if (branch_ != nullptr && branch_->abandoned()) {
      branch_->drop();
    } else {
      coroutine.resume();
    }
  }

 private:
  std::coroutine_handle<> coroutine_;
  branch* branch_;
};

static_assert(unique_function<void()>::stored_inline<resume_job>);

/// Resumes `coroutine` (of branch `owner`, may be null) on `home`: at once when the calling
/// thread belongs to it (or there is no home), otherwise through a resume_job posted there.
inline void resume_on(executor_ref home, std::coroutine_handle<> coroutine,
                      branch* owner) noexcept {
  if (!home || home == current_executor()) {
    resume_job(coroutine, owner)();
    return;
  }
  home.vtable->resume_later(home.target, unique_function<void()>(resume_job(coroutine, owner)));
}

/// Resumes `coroutine` on `home` always through the home's queue, even from the home itself
/// (for a resumption requested from inside a callback that must return first, e.g. a stop
/// callback, or for yield()). Without a home it resumes at once.
inline void resume_later_on(executor_ref home, std::coroutine_handle<> coroutine,
                            branch* owner) noexcept {
  if (!home) {
    resume_job(coroutine, owner)();
    return;
  }
  home.vtable->resume_later(home.target, unique_function<void()>(resume_job(coroutine, owner)));
}

/// What a suspending operation makes of the suspending coroutine's branch (`owner`, may be null)
/// before it waits: a branch that was abandoned does not wait (its drop is posted to this
/// thread's queue: the operation's await_suspend returns true); one whose stop was requested
/// does not wait either (await_suspend returns false and the operation throws
/// operation_canceled).
enum class admission { wait, dropped, stopped };

/// For an operation that found, while its coroutine suspends, that it was cancelled (a stop
/// seen, or a stop callback that ran at once): if the branch was abandoned meanwhile, its drop
/// is posted to this thread's queue (the operation's await_suspend returns true) instead of the
/// coroutine going on to throw operation_canceled — stop(discard) runs no more of a task.
/// stop(discard) abandons before it requests the stop, so a look after the stop was seen cannot
/// miss it. Returns whether the branch is dropped.
[[nodiscard]] inline bool drop_if_abandoned(std::coroutine_handle<> coroutine,
                                            branch* owner) noexcept {
  if (owner == nullptr || !owner->abandoned()) {
    return false;
  }
  resume_later_on(current_executor(), coroutine, owner);  // it drops the branch
  return true;
}

[[nodiscard]] inline admission admit(std::coroutine_handle<> coroutine, branch* owner) noexcept {
  if (owner == nullptr) {
    return admission::wait;
  }
  if (drop_if_abandoned(coroutine, owner)) {
    return admission::dropped;
  }
  if (!owner->token.stop_requested()) {
    return admission::wait;
  }
  // The stop may be a discard's that the look above missed (see drop_if_abandoned).
  return drop_if_abandoned(coroutine, owner) ? admission::dropped : admission::stopped;
}

}  // namespace cyan::dispatch::detail

// An awaiter of event/ (signal_set::wait()) observes a cyan coroutine's stop token: its branch's.
template <typename Promise>
struct cyan::event::detail::coroutine_stop<
    Promise, std::enable_if_t<cyan::dispatch::detail::is_cyan_promise<Promise>>> {
  static std::stop_token of(Promise& promise) noexcept {
    return promise.branch_ != nullptr ? promise.branch_->token : std::stop_token{};
  }
};
