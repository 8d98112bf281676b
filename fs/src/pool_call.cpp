#include "cyan/fs/detail/pool_call.h"

#include <utility>

#include "cyan/dispatch/async.h"

namespace cyan::fs::detail {

// What the pool's job and the awaiting wait share: the job may find the wait gone (it abandoned
// a call still pending, or its frame was destroyed), so neither owns the other.
struct pool_call_state {
  enum phase_type : int { pending, running, done, abandoned };

  // pending -> running by the job, pending -> abandoned by the wait; running -> done by the job.
  std::atomic<int> phase{ pending };
  call_request request;
  int result = 0;  // written by the job before phase becomes done
  // The wait's thread's: the wait there, null once it withdrew. Read by the finish job only.
  pool_call* wait = nullptr;
  // Where the finish goes; null on a thread that is no executor's: the job resumes `coroutine`.
  dispatch::detail::executor_ref thread;
  std::coroutine_handle<> coroutine;
};

namespace {

// Runs on the wait's thread, after the call: the finished phase, unless the wait withdrew.
// Destroyed unrun (the thread finished), it does nothing: the thread's teardown ends the wait.
struct finish_job {
  std::shared_ptr<pool_call_state> call;
  void operator()() noexcept;
};

// Runs on the global pool: the run phase.
struct call_job {
  std::shared_ptr<pool_call_state> call;
  void operator()() noexcept {
    int expected = pool_call_state::pending;
    // acq_rel: pairs with the wait's abandoning compare_exchange in interrupt_call().
    if (!call->phase.compare_exchange_strong(expected, pool_call_state::running,
                                             std::memory_order_acq_rel)) {
      return;  // abandoned before it started
    }
    call->result = run_blocking(call->request);
    // release: pairs with the acquire wait in withdraw_call(), which then lets the buffer go.
    call->phase.store(pool_call_state::done, std::memory_order_release);
    call->phase.notify_all();
    if (!call->thread) {
      const std::coroutine_handle<> coroutine = call->coroutine;
      call.reset();
      coroutine.resume();
      return;
    }
    const dispatch::detail::executor_ref thread = call->thread;
    thread.vtable->resume_later(thread.target,
                                unique_function<void()>(finish_job{ std::move(call) }));
  }
};

}  // namespace

pool_call::~pool_call() {
  withdraw_call();
}

bool pool_call::start(std::coroutine_handle<> coroutine, dispatch::detail::branch* owner,
                      timeout_type timeout) {
  const dispatch::detail::executor_ref thread = dispatch::detail::this_thread_home.thread;
  if (thread) {
    if (const admission refused = admit(coroutine, owner); refused != admission::wait) {
      return refused == admission::dropped;  // dropped: stays suspended; stopped: goes on
    }
  }
  shared_ = std::make_shared<pool_call_state>();
  shared_->request = request_;
  shared_->thread = thread;
  shared_->coroutine = coroutine;
  if (!thread) {
    // No executor, no wait: the job resumes the coroutine, maybe before this returns.
    dispatch::async(call_job{ shared_ });
    return true;
  }
  shared_->wait = this;
  start_wait(coroutine, owner, timeout);
  try {
    dispatch::async(call_job{ shared_ });
  } catch (...) {
    withdraw();
    shared_.reset();
    throw;
  }
  return true;
}

std::error_code pool_call::finish() noexcept {
  if (shared_ != nullptr && !shared_->thread) {
    const int result = shared_->result;  // no executor, no wait: the call is the outcome
    return result < 0 ? std::error_code(-result, std::generic_category()) : std::error_code();
  }
  return finish_wait();
}

int pool_call::result() const noexcept {
  return shared_ != nullptr && !error_ ? shared_->result : 0;
}

void finish_job::operator()() noexcept {
  if (pool_call* wait = call->wait; wait != nullptr) {
    wait->finished(call->result);
  }
}

void pool_call::finished(int result) noexcept {
  completed_ = true;
  if (result < 0) {
    error_ = std::error_code(-result, std::generic_category());
  }
  end_interrupted_wait();
}

dispatch::detail::timed_wait::interruption pool_call::interrupt_call(timed_wait& wait,
                                                                     std::error_code why) noexcept {
  auto& self = static_cast<pool_call&>(wait);
  if (self.completed_) {
    return interruption::completed;  // the finish came: the wait ends as it recorded
  }
  int expected = pool_call_state::pending;
  if (self.shared_->phase.compare_exchange_strong(expected, pool_call_state::abandoned,
                                                  std::memory_order_acq_rel)) {
    self.error_ = why;  // never started: the wait ends now, and the job will do nothing
    return interruption::completed;
  }
  // abandoned: an earlier interruption ended the wait; running or done: the finish will.
  return expected != pool_call_state::abandoned ? interruption::taken : interruption::completed;
}

// The destroyed end: a call that runs may be writing into the caller's buffer, so the frame
// waits for it to return; one still pending is abandoned.
void pool_call::withdraw_call() noexcept {
  if (shared_ != nullptr) {
    int expected = pool_call_state::pending;
    if (!shared_->phase.compare_exchange_strong(expected, pool_call_state::abandoned,
                                                std::memory_order_acq_rel) &&
        expected == pool_call_state::running) {
      // acquire: pairs with the job's release store of done.
      shared_->phase.wait(pool_call_state::running, std::memory_order_acquire);
    }
    shared_->wait = nullptr;
  }
  withdraw();
}

}  // namespace cyan::fs::detail
