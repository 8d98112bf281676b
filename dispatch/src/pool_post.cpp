// Posting to the pool: plain posts, delayed posts (through the timer thread), token posts and
// the hand-overs of work accepted before a stop.

#include <utility>

#include "cyan/dispatch/detail/destroy_task.h"
#include "pool_core.h"

namespace cyan::dispatch::detail {

// From a task on one of this pool's workers, to that worker's deque (see pool_local.cpp);
// from anywhere else, or when the deque is full, to the shared queue.
void pool_core::post(task&& t) {
  if (worker_state* self = local_worker()) {
    if (queue_.sealed()) {
      throw executor_stopped("cyan::dispatch::thread_pool: post after stop()");
    }
    if (push_local(*self, std::move(t))) {
      return;
    }
  }
  if (!queue_.try_push(std::move(t))) {
    throw executor_stopped("cyan::dispatch::thread_pool: post after stop()");
  }
  wake_unless_spinning();
}

// Delayed tasks wait on the timer thread (a handler_thread's delayed work, see "Delayed work" in
// handler_thread_runtime.cpp for why not the timer wheel); when one is due, the timer thread
// pushes it onto the shared queue like a hand-over, so any free worker runs it.
void pool_core::post_after(task&& t, thread_pool::clock::duration delay) {
  work_.work_started();  // see "Stop" in detail/outstanding_work.h
  if (queue_.sealed()) {
    work_.work_finished();
    throw executor_stopped("cyan::dispatch::thread_pool: post after stop()");
  }
  // From here the count belongs to the delayed_task, which leaves when it is queued or
  // destroyed unrun (also when this post throws: the timer thread stopped meanwhile).
  timer_thread_->post(delayed_task(*this, std::move(t)), delay);
}

pool_core::delayed_task::~delayed_task() {
  if (core_ != nullptr) {  // not due before the stop: cancelled (an awaitable reports it)
    destroy_task(task_, [this](std::exception_ptr error) { core_->report(std::move(error)); });
    core_->work_.work_finished();
  }
}

// Due: queued like a token hand-over (accepted while draining, refused only once closed, which
// cannot happen while this task is counted in work_). On the timer thread.
void pool_core::delayed_task::operator()() {
  pool_core* core = std::exchange(core_, nullptr);
  try {
    core->post_handed_over(std::move(task_));
  } catch (...) {  // std::bad_alloc from the queue: the task is dropped, and says so
    core->report(std::current_exception());
    destroy_task(task_, [core](std::exception_ptr error) { core->report(std::move(error)); });
  }
  core->work_.work_finished();
}

void pool_core::post_serial(const serial_token& token, task&& t) {
  // Counted until submit() has counted t in the tracker (see "Stop" in outstanding_work.h).
  const outstanding_work::scope counted(work_);
  if (queue_.sealed()) {
    throw executor_stopped("cyan::dispatch::thread_pool: post after stop()");
  }
  serial_access::submit(
      token, std::move(t), [this](task step) { post_handed_over(std::move(step)); },
      &work_.tokens());
}

// Work accepted before stop() that reaches the queue later: a token's step handed over by
// whoever finished the token's previous task, or a delayed task that fell due. Accepted while
// draining; refused once the queue is closed, which destroys it unrun (with this function's
// caller's parameter): a token task is then cancelled and the token moves on.
void pool_core::post_handed_over(task&& work) {
  if (worker_state* self = local_worker()) {
    // Accepted until the workers were told to stop (the queue is closed then); the worker runs
    // its deque empty before it leaves its round, so one that races the close is not lost.
    if (finished_.load(std::memory_order_seq_cst)) {
      return;  // refused: the caller's `work` is destroyed unrun
    }
    if (push_local(*self, std::move(work))) {
      return;
    }
  }
  if (queue_.try_push(std::move(work), task_queue::push_policy::unless_closed)) {
    wake_unless_spinning();
  }
}

const executor_vtable pool_core::vtable{ &pool_core::resume_later, &pool_core::resume_next };

// A coroutine's resumption (see detail/coro_env.h): a hand-over. Refused once the queue is
// closed: `job` is then destroyed unrun, which drops the coroutine's branch.
void pool_core::resume_later(void* self, task&& job) noexcept {
  try {
    static_cast<pool_core*>(self)->post_handed_over(std::move(job));
  } catch (...) {  // std::bad_alloc: the caller's `job` is destroyed unrun
  }
}

}  // namespace cyan::dispatch::detail
