#include "cyan/dispatch/detail/timed_wait.h"

#include <memory>
#include <utility>

#include "cyan/common/thread.h"

namespace cyan::dispatch::detail {
namespace {

thread_local std::unique_ptr<event::timer_wheel> wait_wheel;

std::error_code canceled() noexcept {
  return std::make_error_code(std::errc::operation_canceled);
}

}  // namespace

event::timer_wheel* this_thread_wait_wheel() {
  if (!current_executor()) {
    return nullptr;
  }
  if (!wait_wheel) {
    wait_wheel = std::make_unique<event::timer_wheel>(this_thread::get_event_loop());
    wait_wheel->start();
  }
  return wait_wheel.get();
}

void reset_this_thread_wait_wheel() noexcept {
  wait_wheel.reset();
}

// The wheel's entry: 8 bytes, stored without allocation. Destroyed unrun — by a cancel() after
// the wait ended (kDone is set then), or with the thread's wheel — it reports lost().
struct timed_wait::expiry_entry {
  timed_wait* self;
  explicit expiry_entry(timed_wait* owner) noexcept : self(owner) {}
  expiry_entry(expiry_entry&& other) noexcept : self(std::exchange(other.self, nullptr)) {}
  expiry_entry& operator=(expiry_entry&&) = delete;
  ~expiry_entry() {
    if (self != nullptr) {
      self->wheel_ = nullptr;  // this entry is going: nothing to cancel
      self->lost();
    }
  }
  void operator()() noexcept { std::exchange(self, nullptr)->expired(); }
  // For the wheel (event::detail::wheel_prefetchable): the wait first, then the frame the
  // resumption jumps into and the branch it checks.
  void prefetch(unsigned step) const noexcept {
    if (step == 1) {
      __builtin_prefetch(self);
      __builtin_prefetch(&self->state_);
      return;
    }
    __builtin_prefetch(self->coroutine_.address());
    if (self->owner_ != nullptr) {
      __builtin_prefetch(&self->owner_->root);
    }
  }
};

// Posted by a stop request to the loop thread. Destroyed unrun by that thread (a
// stop(discard)), it ends the wait and drops the task's branch like any refused resumption.
// Refused by the thread (it finished), it does nothing (see the top of timed_wait.h).
struct timed_wait::cancel_job {
  timed_wait* self;
  explicit cancel_job(timed_wait* owner) noexcept : self(owner) {}
  cancel_job(cancel_job&& other) noexcept : self(std::exchange(other.self, nullptr)) {}
  cancel_job& operator=(cancel_job&&) = delete;
  ~cancel_job() {
    if (self != nullptr && self->home_ == &this_thread_home) {
      self->state_.fetch_or(kDone, std::memory_order_acq_rel);  // the entry's end is not lost()
      self->stop_waiting();
      resume_job unrun(self->coroutine_, self->owner_);  // its destructor drops the branch
    }
  }
  void operator()() noexcept { std::exchange(self, nullptr)->cancel_on_loop_thread(); }
};

timed_wait::~timed_wait() {
  withdraw();
}

void timed_wait::withdraw() noexcept {
  stop_watch_.reset();  // waits for a stop callback running on another thread
  if (!coroutine_) {
    return;  // never waited: finished at once, or never awaited
  }
  // kDone first, so that the expiry entry's destruction does not report the wait lost.
  const unsigned previous = state_.fetch_or(kDone, std::memory_order_acq_rel);
  // A stop request's cancel job ends the wait, unless an interruptible wait took it.
  if ((previous & kDone) == 0 && ((previous & kStop) == 0 || stop_interrupted_)) {
    stop_waiting();
  }
}

timed_wait::admission timed_wait::admit(std::coroutine_handle<> coroutine, branch* owner) noexcept {
  const admission found = detail::admit(coroutine, owner);
  if (found == admission::stopped) {
    error_ = canceled();
  }
  return found;
}

void timed_wait::start_wait(std::coroutine_handle<> coroutine, branch* owner,
                            timeout_type timeout) {
  if (timeout != kNoTimeout) {
    event::timer_wheel* wheel = this_thread_wait_wheel();
    // Whole milliseconds (what timeouts usually are) take the wheel's path without a division.
    using std::chrono::milliseconds;
    entry_ =
        timeout % milliseconds(1) == timeout_type::zero()
            ? wheel->post(expiry_entry(this), std::chrono::duration_cast<milliseconds>(timeout))
            : wheel->post(expiry_entry(this), timeout);
    wheel_ = wheel;
  } else {
    link_to_this_thread();  // without an entry in the wheel, the thread's list ends it
  }
  coroutine_ = coroutine;
  owner_ = owner;
  home_ = &this_thread_home;
  if (owner != nullptr && owner->token.stop_possible()) {
    stop_watch_.emplace(owner->token, on_stop{ this });  // runs at once if stopped meanwhile
  }
}

// Withdraws the wait from the thread, the wheel and the derived wait's source.
void timed_wait::stop_waiting() noexcept {
  unlink_from_thread();
  if (withdraw_ != nullptr) {
    withdraw_(*this);
  }
  if (wheel_ != nullptr) {
    std::exchange(wheel_, nullptr)->cancel(entry_);
  }
}

bool timed_wait::begin_retry() noexcept {
  const unsigned previous = state_.fetch_or(kBusy, std::memory_order_acq_rel);
  return (previous & (kStop | kDone)) == 0;
}

bool timed_wait::retry_failed() noexcept {
  // acq_rel: pairs with stop_requested()'s fetch_or; a stop that saw kBusy left it to us.
  const unsigned after = state_.fetch_and(~kBusy, std::memory_order_acq_rel);
  return (after & kStop) == 0;
}

void timed_wait::end_wait() noexcept {
  state_.fetch_or(kDone, std::memory_order_acq_rel);
  stop_waiting();
  resume_on(home_->executor, coroutine_, owner_);
}

// Marks the wait ended by a loop-thread end; false when a stop request came first (its cancel
// job ends the wait).
bool timed_wait::claim_end() noexcept {
  const unsigned previous = state_.fetch_or(kDone, std::memory_order_acq_rel);
  return (previous & kStop) == 0;
}

void timed_wait::end_wait_later() noexcept {
  if (!claim_end()) {
    return;
  }
  stop_waiting();
  resume_later_on(home_->executor, coroutine_, owner_);
}

void timed_wait::expired() noexcept {
  wheel_ = nullptr;  // the entry is running: nothing to cancel
  const std::error_code expiry =
      expiry_ == std::errc{} ? std::error_code() : std::make_error_code(expiry_);
  const interruption taken =
      interrupt_ != nullptr ? interrupt_(*this, expiry) : interruption::plain;
  if (taken == interruption::taken) {
    return;  // the operation's completion ends the wait
  }
  if (!claim_end()) {
    return;
  }
  if (taken == interruption::plain) {
    error_ = expiry;
  }
  stop_waiting();
  resume_on(home_->executor, coroutine_, owner_);
}

// The thread finished under the wait (or its wheel went away with it). A stop request that
// came first (kStop without kDone) had its cancel job refused: ending the wait is ours.
void timed_wait::lost() noexcept {
  const unsigned previous = state_.fetch_or(kDone, std::memory_order_acq_rel);
  if ((previous & kDone) != 0) {
    return;
  }
  stop_waiting();
  if (owner_ != nullptr && owner_->root != nullptr) {
    owner_->drop();
  }
  // A coroutine that belongs to no spawned task stays suspended: nothing owns it to destroy it.
}

void timed_wait::stop_requested() noexcept {
  const unsigned previous = state_.fetch_or(kStop, std::memory_order_acq_rel);
  if (previous != 0) {
    return;  // ended already, or the loop thread is retrying and will see kStop
  }
  const executor_ref loop_thread = home_->thread;
  loop_thread.vtable->resume_later(loop_thread.target, unique_function<void()>(cancel_job(this)));
}

void timed_wait::cancel_on_loop_thread() noexcept {
  const interruption taken =
      interrupt_ != nullptr ? interrupt_(*this, canceled()) : interruption::plain;
  if (taken == interruption::taken) {
    stop_interrupted_ = true;  // the operation's completion ends the wait
    return;
  }
  if (taken == interruption::plain) {
    error_ = canceled();
  }
  end_wait();
}

void timed_wait::end_interrupted_wait() noexcept {
  const unsigned previous = state_.fetch_or(kDone, std::memory_order_acq_rel);
  if ((previous & kStop) != 0 && !stop_interrupted_) {
    return;  // the stop's cancel job is on its way: it ends the wait
  }
  stop_waiting();
  resume_on(home_->executor, coroutine_, owner_);
}

}  // namespace cyan::dispatch::detail
