#include "cyan/dispatch/detail/thread_bound_wait.h"

namespace cyan::dispatch::detail {

// A thread's list of waits: circular through this sentinel, so that unlinking a wait touches
// only its neighbours.
class thread_wait_list final : public thread_bound_wait {
 public:
  thread_wait_list() noexcept : thread_bound_wait(nullptr) {
    previous_ = this;
    next_ = this;
  }
  ~thread_wait_list() {
    previous_ = nullptr;  // so the base destructor does not unlink the sentinel
    next_ = nullptr;
  }
  void link(thread_bound_wait& wait) noexcept {
    wait.previous_ = previous_;
    wait.next_ = this;
    previous_->next_ = &wait;
    previous_ = &wait;
  }
  static void unlink(thread_bound_wait& wait) noexcept {
    if (wait.previous_ == nullptr) {
      return;
    }
    wait.previous_->next_ = wait.next_;
    wait.next_->previous_ = wait.previous_;
    wait.previous_ = nullptr;
    wait.next_ = nullptr;
  }

  // Ending a wait may destroy frames that hold other waits (they unlink themselves) or start
  // new ones: take the first until none is left.
  void end_all() noexcept {
    while (next_ != this) {
      thread_bound_wait& first = *next_;
      unlink(first);
      first.thread_finished_(first);
    }
  }
};

namespace {

thread_local thread_wait_list this_thread_waits;

}  // namespace

void thread_bound_wait::link_to_this_thread() noexcept {
  thread_wait_list::unlink(*this);
  this_thread_waits.link(*this);
}

void thread_bound_wait::unlink_from_thread() noexcept {
  thread_wait_list::unlink(*this);
}

void end_this_thread_waits() noexcept {
  this_thread_waits.end_all();
}

}  // namespace cyan::dispatch::detail
