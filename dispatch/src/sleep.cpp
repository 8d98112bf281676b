#include "cyan/dispatch/sleep.h"

#include <memory>
#include <system_error>
#include <utility>

#include "cyan/common/thread.h"

namespace cyan::dispatch::detail {
namespace {

thread_local std::unique_ptr<event::timer_wheel> sleep_wheel;

}  // namespace

void throw_operation_canceled(const char* what) {
  throw std::system_error(std::make_error_code(std::errc::operation_canceled), what);
}

event::timer_wheel* this_thread_sleep_wheel() {
  if (!current_executor()) {
    return nullptr;
  }
  if (!sleep_wheel) {
    sleep_wheel = std::make_unique<event::timer_wheel>(this_thread::get_event_loop());
    sleep_wheel->start();
  }
  return sleep_wheel.get();
}

void reset_this_thread_sleep_wheel() noexcept {
  sleep_wheel.reset();
}

// A stop request won the claim: on the wheel's thread, take the entry back, then resume at
// home. Destroyed unrun (that thread refused it) it drops the branch like any resumption.
struct sleep_awaiter::cancel_job {
  sleep_awaiter* self;

  explicit cancel_job(sleep_awaiter* owner) noexcept : self(owner) {}
  cancel_job(cancel_job&& other) noexcept : self(std::exchange(other.self, nullptr)) {}
  cancel_job& operator=(cancel_job&&) = delete;
  ~cancel_job() {
    if (self != nullptr) {
      if (self->home_ == &this_thread_home) {
        self->wheel_->cancel(self->entry_);
      }
      resume_job unrun(self->coroutine_, self->owner_);  // its destructor drops the branch
    }
  }
  void operator()() noexcept {
    sleep_awaiter* awaiter = std::exchange(self, nullptr);
    awaiter->wheel_->cancel(awaiter->entry_);
    resume_on(awaiter->home_->executor, awaiter->coroutine_, awaiter->owner_);
  }
};

bool sleep_awaiter::suspend(std::coroutine_handle<> coroutine, branch* owner) {
  coroutine_ = coroutine;
  owner_ = owner;
  if (owner != nullptr) {
    if (owner->abandoned()) {
      resume_later_on(current_executor(), coroutine, owner);  // it drops the branch
      return true;
    }
    if (owner->token.stop_requested()) {
      cancelled_ = true;
      return false;
    }
  }
  wheel_ = this_thread_sleep_wheel();
  home_ = &this_thread_home;
  // The wheel counts the delay from a clock reading of its own, no earlier than this base (the
  // reading due_ was computed from, when known), so the entry is never due before due_.
  const clock::time_point base = now_ != clock::time_point::min() ? now_ : clock::now();
  entry_ = wheel_->post(fire(this), std::chrono::ceil<std::chrono::nanoseconds>(due_ - base));
  if (owner != nullptr && owner->token.stop_possible()) {
    stop_watch_.emplace(owner->token, on_stop{ this });  // runs at once if stopped meanwhile
  }
  return true;
}

void sleep_awaiter::fired() noexcept {
  if (claim()) {
    resume_on(home_->executor, coroutine_, owner_);
  }
}

// The entry was destroyed unrun, by a cancel() (the claim is taken then) or with the wheel.
void sleep_awaiter::lost() noexcept {
  if (claim() && owner_ != nullptr && owner_->root != nullptr) {
    owner_->drop();
  }
  // A coroutine that belongs to no spawned task stays suspended: nothing owns it to destroy it.
}

void sleep_awaiter::stop_requested() noexcept {
  if (!claim()) {
    return;
  }
  cancelled_ = true;
  const executor_ref loop_thread = home_->thread;
  loop_thread.vtable->resume_later(loop_thread.target, unique_function<void()>(cancel_job(this)));
}

void sleep_awaiter::await_resume() {
  if (off_loop_) {
    off_loop_->awaiter.await_resume();
    return;
  }
  stop_watch_.reset();  // waits for a stop_requested() running on another thread
  if (cancelled_) {
    throw_operation_canceled("cyan::dispatch::sleep: cancelled by a stop request");
  }
}

sleep_awaiter::~sleep_awaiter() {
  stop_watch_.reset();
  // A frame destroyed while it sleeps: take the entry back (claimed first, so that the entry's
  // destruction does not drop the branch).
  if (wheel_ != nullptr && claim() && home_ == &this_thread_home) {
    wheel_->cancel(entry_);
  }
}

}  // namespace cyan::dispatch::detail
