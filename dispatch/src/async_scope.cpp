#include "cyan/dispatch/async_scope.h"

#include <stdexcept>

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

bool async_scope::wait(std::coroutine_handle<> coroutine, detail::executor_ref home,
                       detail::branch* owner) {
  const std::lock_guard lock(mutex_);
  if (live_ == 0) {
    return false;
  }
  waiting_.push_back(waiter{ coroutine, home, owner });
  return true;
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
