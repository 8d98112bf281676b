#pragma once

// A handle on a handler thread that any thread may keep past the thread's end: what a socket
// keeps of the thread it belongs to, so that a close on another thread can hand the work that
// must not race the thread's loop (stopping a watcher, closing a descriptor the loop still
// watches) to that thread, without blocking the caller.
//
//   hand over  run_on_thread() pushes the job onto the anchor's list (one CAS, lock-free) and,
//              when the list was empty, posts one drain job to the thread's inbox; the thread
//              runs the jobs listed, in the order they were handed over, in its round.
//   finish     the thread's inbox refuses hand-overs once it finishes: its teardown runs what
//              is listed first (run_handed_over(), while the ring and the loop are whole), and
//              as its very last step (end_this_thread()) marks the anchor ended and runs what
//              came meanwhile. A job handed over after that runs on the caller, at once: the
//              thread touches its loop no more, so nothing the job does there races it.
//
// The thread object (whose inbox the drain job goes to) may be destroyed once the thread has
// finished: end_this_thread() waits for a hand-over that is between its push and its post.
//
// Thread rules: run_on_thread() [any thread]; everything else the anchored thread's.

#include <atomic>
#include <memory>

#include "cyan/common/unique_function.h"
#include "cyan/dispatch/detail/coro_env.h"

namespace cyan::dispatch::detail {

/// See the top of this file.
class thread_anchor {
 public:
  /// What runs on the thread. Must not throw.
  using job = unique_function<void()>;

  /// `thread`: the handler thread's executor_ref (this_thread_home.thread).
  explicit thread_anchor(executor_ref thread) noexcept : thread_(thread) {}
  thread_anchor(const thread_anchor&) = delete;
  thread_anchor& operator=(const thread_anchor&) = delete;
  ~thread_anchor() = default;

  /// The calling handler thread's anchor; null on any other thread. [any thread, about itself]
  [[nodiscard]] static const std::shared_ptr<thread_anchor>& this_thread() noexcept;

  /// Runs `work` on the anchored thread, in a later round (or in its teardown), or on the
  /// caller at once when that thread has finished with its loop (see the top of this file).
  /// Out of memory, it runs `work` on the caller too. [any thread]
  void run_on_thread(job work) noexcept;

  /// Makes the calling handler thread's anchor (its executor_ref `thread`). Throws
  /// std::bad_alloc. [the thread, at its start]
  static void set_up_this_thread(executor_ref thread);
  /// Runs the jobs handed over so far. [the thread, at the start of its teardown]
  static void run_handed_over() noexcept;
  /// Marks the anchor ended, waits for hand-overs under way, runs what they listed and drops
  /// the thread's reference. [the thread, the last step of its teardown]
  static void end_this_thread() noexcept;

 private:
  struct node {
    node* next;
    job work;
  };

  [[nodiscard]] static node* ended() noexcept;
  void run_pending() noexcept;
  void end() noexcept;
  static void run_list(node* newest_first) noexcept;

  // The jobs handed over, newest first; ended() once the thread finished. Pushed by any thread,
  // taken by the anchored thread.
  std::atomic<node*> head_{ nullptr };
  // Hand-overs between their push and their post of the drain job (see end()).
  std::atomic<unsigned> posting_{ 0 };
  executor_ref thread_;
};

}  // namespace cyan::dispatch::detail
