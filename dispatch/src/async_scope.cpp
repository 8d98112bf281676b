#include "cyan/dispatch/async_scope.h"

#include <stdexcept>
#include <system_error>

namespace cyan::dispatch {

async_scope::ticket::ticket(async_scope& scope) : scope_(&scope) {
  const std::lock_guard lock(scope.mutex_);
  ++scope.live_;
}

async_scope::ticket::~ticket() {
  if (scope_ != nullptr) {
    scope_->leave();
  }
}

async_scope::~async_scope() {
  std::unique_lock lock(mutex_);
  if (live_ != 0) {
    source_.request_stop();
    idle_.wait(lock, [this] { return live_ == 0; });
  }
}

std::size_t async_scope::size() const {
  const std::lock_guard lock(mutex_);
  return live_;
}

void async_scope::join_blocking() {
  if (detail::current_executor()) {
    throw std::logic_error(
        "cyan::dispatch::async_scope::join_blocking called on a handler thread or pool worker "
        "(use co_await join())");
  }
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return live_ == 0; });
}

bool async_scope::join_blocking_until(std::chrono::steady_clock::time_point deadline) {
  if (detail::current_executor()) {
    throw std::logic_error(
        "cyan::dispatch::async_scope::join_blocking_for called on a handler thread or pool "
        "worker (use co_await join_for())");
  }
  std::unique_lock lock(mutex_);
  return idle_.wait_until(lock, deadline, [this] { return live_ == 0; });
}

bool async_scope::wait(std::coroutine_handle<> coroutine, detail::executor_ref home,
                       detail::branch* owner, const bool* refused) {
  const std::lock_guard lock(mutex_);
  if (live_ == 0 || (refused != nullptr && *refused)) {
    return false;
  }
  waiting_.push_back(waiter{ coroutine, home, owner });
  return true;
}

bool async_scope::withdraw(std::coroutine_handle<> coroutine) noexcept {
  const std::lock_guard lock(mutex_);
  for (auto at = waiting_.begin(); at != waiting_.end(); ++at) {
    if (at->coroutine == coroutine) {
      waiting_.erase(at);
      return true;
    }
  }
  return false;
}

task<> async_scope::join_or_stop() {
  co_await stoppable_join_awaiter(*this);
}

void async_scope::stoppable_join_awaiter::stop_requested() noexcept {
  {
    const std::lock_guard lock(scope_.mutex_);
    stopped_ = true;
  }
  // Registered: ours to resume now. Not (yet) registered: wait() sees stopped_ and does not
  // suspend. Taken by leave(): leave() resumes it.
  if (coroutine_ && scope_.withdraw(coroutine_)) {
    detail::resume_later_on(home_, coroutine_, owner_);  // inside the callback: through the queue
  }
}

void async_scope::stoppable_join_awaiter::await_resume() {
  stop_.reset();  // waits for a stop callback still running on another thread
  coroutine_ = nullptr;
  bool stopped = false;
  {
    const std::lock_guard lock(scope_.mutex_);
    stopped = stopped_;
  }
  if (stopped && scope_.size() != 0) {
    throw std::system_error(std::make_error_code(std::errc::operation_canceled));
  }
}

// The last child out wakes the blocked joiners under the lock (after it, the scope may be
// destroyed at once), then resumes the awaiting ones, touching only what it took out.
void async_scope::leave() noexcept {
  std::vector<waiter> resumed;
  {
    const std::lock_guard lock(mutex_);
    if (--live_ != 0) {
      return;
    }
    resumed.swap(waiting_);
    idle_.notify_all();
  }
  for (const waiter& w : resumed) {
    detail::resume_on(w.home, w.coroutine, w.owner);
  }
}

}  // namespace cyan::dispatch
