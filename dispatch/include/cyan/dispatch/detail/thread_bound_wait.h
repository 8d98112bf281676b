#pragma once

// Waits that only one handler thread's loop can end, and what happens to them when that thread
// finishes first: the timed_wait (timed_wait.h) that has no deadline links itself here (one
// with a deadline is bound to the thread by its entry in the thread's timer wheel instead).
//
// A task may wait on a thread that is not its spawn executor (it hopped there with schedule()),
// so that thread's stop(drain) does not wait for it. When the thread finishes with such a wait
// still pending, nothing could ever end it: its loop no longer runs, and jobs posted to the
// thread (a stop request's cancel job) are refused. So the thread's teardown ends each one
// (end_this_thread_waits()): the wait withdraws itself and drops the task's branch, as a
// resumption refused by a finished executor does (see "Branches" in coro_env.h).

namespace cyan::dispatch::detail {

/// A wait pending on the calling thread's loop (see the top of this file). Intrusive: linking
/// allocates nothing. Not polymorphic: what ends the wait is a function the derived wait
/// passes in (so a wait that never links, a sleep, carries no vtable). Every member is the
/// loop thread's.
class thread_bound_wait {
 public:
  thread_bound_wait(const thread_bound_wait&) = delete;
  thread_bound_wait& operator=(const thread_bound_wait&) = delete;

 protected:
  /// Called when the thread finishes with the wait pending: end it (it is unlinked already).
  using finished_fn = void (*)(thread_bound_wait& wait) noexcept;

  explicit thread_bound_wait(finished_fn thread_finished) noexcept
      : thread_finished_(thread_finished) {}
  ~thread_bound_wait() { unlink_from_thread(); }

  /// Links the wait into the calling thread's list. [loop thread]
  void link_to_this_thread() noexcept;
  /// Unlinks it if it is linked. [loop thread]
  void unlink_from_thread() noexcept;

 private:
  friend class thread_wait_list;

  finished_fn thread_finished_;
  // Neighbours in the thread's circular list; null while not linked.
  thread_bound_wait* previous_ = nullptr;
  thread_bound_wait* next_ = nullptr;
};

/// Ends every wait still linked to the calling thread, oldest first, including those that
/// ending one links meanwhile. Called by a handler thread's teardown. [the thread]
void end_this_thread_waits() noexcept;

}  // namespace cyan::dispatch::detail
