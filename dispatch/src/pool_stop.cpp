// The pool's side of the stop protocol (see "Stop" in detail/outstanding_work.h), and join.

#include <system_error>

#include "pool_core.h"

// Stop, the pool's steps (the phases and the argument are in detail/outstanding_work.h):
//   1. stop():       discard: flag it (run_one() skips tasks from then on); seal the queue: a
//                    user post's claim either precedes the seal (the task is queued and will run,
//                    or be cancelled by discard) or is refused, and the post throws; work_.
//                    stopping(); stop the timer thread (drain: it queues what is due and destroys
//                    the rest; discard: destroys all), so every delayed task leaves work_'s count;
//                    discard: abandon the spawned tasks;
//   2. serve:        the workers go on running the queue, hand-overs included (token tasks, due
//                    delayed tasks and coroutine resumptions: the pushes allowed after the seal);
//   3. try_finish(): once work_.drained(), close_if_empty() closes the queue (atomically with
//                    the emptiness check, so a hand-over is either queued first or refused) and
//                    the workers are told to stop, once, in the pool's mode: each then finishes
//                    as a handler_thread does (its inbox, its delayed work).
// Whoever may change one of those conditions calls try_finish(): stop() itself, a worker that
// found the queue empty (run_batch()), and work_'s on_drop (a token post or a delayed task as it
// leaves, the token tracker when it is released: a hand-over releases it only after its push,
// the last spawned task as it ends).

namespace cyan::dispatch::detail {

void pool_core::stop(stop_mode mode) noexcept {
  if (mode == stop_mode::discard) {
    discarding_.store(true, std::memory_order_seq_cst);
  }
  queue_.seal();
  work_.stopping();
  // Drain: due delayed tasks are queued, the rest destroyed unrun; discard: all destroyed.
  if (timer_thread_) {  // null only while a failed constructor cleans up
    timer_thread_->stop(mode);
  }
  if (mode == stop_mode::discard) {
    work_.spawned().abandon_all();  // their next resumption drops them (see detail/coro_env.h)
  }
  try_finish();
}

void pool_core::try_finish() noexcept {
  if (!queue_.sealed() || finished_.load(std::memory_order_seq_cst)) {
    return;
  }
  // The queue last (see "Stop" in detail/outstanding_work.h).
  // A worker's next task counts as queued (see "The next task" in pool_worker_round.cpp).
  // So does a job in a worker's deque (see pool_local.cpp).
  if (!work_.drained() || any_next() || any_deque() || !queue_.close_if_empty()) {
    return;
  }
  if (finished_.exchange(true, std::memory_order_seq_cst)) {
    return;
  }
  const stop_mode mode =
      discarding_.load(std::memory_order_seq_cst) ? stop_mode::discard : stop_mode::drain;
  for (auto& worker : workers_) {
    worker->stop(mode);
  }
}

void pool_core::on_work_drop(void* self) noexcept {
  static_cast<pool_core*>(self)->try_finish();
}

void pool_core::join() {
  if (is_current()) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "cyan::dispatch::thread_pool::join on one of its workers");
  }
  for (auto& worker : workers_) {
    worker->join();
  }
  if (timer_thread_) {
    timer_thread_->join();
  }
}

bool pool_core::is_current() const noexcept {
  for (const auto& worker : workers_) {
    if (worker->is_current()) {
      return true;
    }
  }
  return false;
}

}  // namespace cyan::dispatch::detail
