// The pool's side of the stop protocol, and join.

#include <system_error>

#include "pool_core.h"

// Stop. stop() seals the queue: a user post's claim either precedes the seal (the task is
// queued and will run, or be cancelled by discard) or is refused, and the post throws. Token
// posts are counted in serial_posting_ from before their check of the seal to the end of their
// submit, and the tasks they park behind another executor's task are counted by tracker_;
// delayed posts are counted in delayed_pending_ from before their check of the seal until the
// timer thread has queued them or destroyed them unrun (stop() stops the timer thread: in
// drain it queues what is due and destroys the rest); tasks started by co_spawn are counted in
// spawned_ from before their first post until they finished or were destroyed (their
// resumptions are hand-overs; a discard abandons them, so they are destroyed at their next
// resumption). The pool is drained when, read in this order, serial_posting_ == 0,
// delayed_pending_ == 0, spawned_ is empty, tracker_ is released and the queue is empty; then
// close_if_empty() closes it (atomically with the emptiness check, so a token hand-over or a due
// delayed task, the pushes allowed after the seal, is either queued first or refused) and the
// workers are told to stop, once. Whoever may change one of those conditions calls try_finish():
// stop() itself, a worker that found the queue empty, a token post or a delayed task as it leaves,
// and the tracker when it is released (a hand-over releases it only after its push).

namespace cyan::dispatch::detail {

void pool_core::stop(stop_mode mode) noexcept {
  if (mode == stop_mode::discard) {
    discarding_.store(true, std::memory_order_seq_cst);
  }
  queue_.seal();
  tracker_.stopping();
  // Drain: due delayed tasks are queued, the rest destroyed unrun; discard: all destroyed.
  if (timer_thread_) {  // null only while a failed constructor cleans up
    timer_thread_->stop(mode);
  }
  if (mode == stop_mode::discard) {
    spawned_.abandon_all();  // their next resumption drops them (see detail/coro_env.h)
  }
  try_finish();
}

void pool_core::try_finish() noexcept {
  if (!queue_.sealed() || finished_.load(std::memory_order_seq_cst)) {
    return;
  }
  // In this order (see "Stop").
  if (serial_posting_.value.load(std::memory_order_seq_cst) != 0 ||
      delayed_pending_.value.load(std::memory_order_seq_cst) != 0 || !spawned_.empty() ||
      !tracker_.released() || !queue_.close_if_empty()) {
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

void pool_core::on_spawned_empty(void* self) noexcept {
  static_cast<pool_core*>(self)->try_finish();
}

void pool_core::on_tracker_released(void* self) noexcept {
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
