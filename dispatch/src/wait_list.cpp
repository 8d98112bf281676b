#include "cyan/dispatch/detail/wait_list.h"

#include <utility>

namespace cyan::dispatch::detail {
namespace {

// How many waiters a thread is running inside granting calls right now (see "resume" in
// wait_list.h); at the bound, wakes go through the home's queue. A withdrawal's give-back never
// runs a waiter inside a frame's destruction: it counts as at the bound.
constexpr int kMaxNestedWakes = 16;
thread_local int nested_wakes = 0;

struct nested_wake {
  explicit nested_wake(int depth = 1) noexcept : depth_(depth) { nested_wakes += depth_; }
  ~nested_wake() { nested_wakes -= depth_; }
  nested_wake(const nested_wake&) = delete;
  nested_wake& operator=(const nested_wake&) = delete;
  int depth_;
};

}  // namespace

void sync_wait::wake() noexcept {
  if (!arrive()) {
    return;  // await_suspend() has not returned yet: it goes on with the coroutine itself
  }
  // Inline only on the waiter's own handler thread: there nothing else could run the granting
  // task meanwhile. On a pool worker the granting task must be free to go on at once (another
  // worker may be idle), so the waiter becomes the worker's next task: it runs when the
  // granting task returns (which it most often does soon, waiting for the lock or the item in
  // turn), on the core that has the lock's and the item's lines, unless an idle worker takes it
  // over first (see "The next task" in pool_worker_round.cpp).
  const thread_home& here = this_thread_home;
  if (home_ && home_ == here.executor) {
    if (here.executor == here.thread && nested_wakes < kMaxNestedWakes) {
      const nested_wake counted;
      resume_job(coroutine_, owner_)();
      return;
    }
    home_.vtable->resume_next(home_.target,
                              unique_function<void()>(resume_job(coroutine_, owner_)));
    return;
  }
  resume_later_on(home_, coroutine_, owner_);
}

void wait_list::push_back(sync_wait& waiter) noexcept {
  waiter.state_ = sync_wait::state::waiting;
  waiter.prev_ = tail_;
  waiter.next_ = nullptr;
  if (tail_ != nullptr) {
    tail_->next_ = &waiter;
  } else {
    head_ = &waiter;
  }
  tail_ = &waiter;
}

std::size_t wait_list::size_up_to(std::size_t limit) const noexcept {
  std::size_t count = 0;
  for (const sync_wait* waiter = head_; waiter != nullptr && count < limit;
       waiter = waiter->next_) {
    ++count;
  }
  return count;
}

void wait_list::unlink(sync_wait& waiter) noexcept {
  (waiter.prev_ != nullptr ? waiter.prev_->next_ : head_) = waiter.next_;
  (waiter.next_ != nullptr ? waiter.next_->prev_ : tail_) = waiter.prev_;
  waiter.prev_ = waiter.next_ = nullptr;
}

sync_wait* wait_list::grant_front() noexcept {
  sync_wait* first = head_;
  if (first != nullptr) {
    unlink(*first);
    first->state_ = sync_wait::state::granted;
  }
  return first;
}

void wait_list::grant_all(granted_chain& woken) noexcept {
  while (sync_wait* waiter = grant_front()) {
    woken.add(*waiter);
  }
}

void granted_chain::add(sync_wait& waiter) noexcept {
  waiter.next_ = nullptr;
  (tail_ != nullptr ? tail_->next_ : head_) = &waiter;
  tail_ = &waiter;
}

void granted_chain::wake_all() noexcept {
  sync_wait* waiter = std::exchange(head_, nullptr);
  tail_ = nullptr;
  while (waiter != nullptr) {
    // Read before the wake: from then on the waiter may resume and be gone.
    sync_wait* next = std::exchange(waiter->next_, nullptr);
    waiter->wake();
    waiter = next;
  }
}

void sync_wait::stop_requested() noexcept {
  {
    std::lock_guard guard(list_.lock());
    if (state_ != state::waiting) {
      return;  // granted first: the grant wins
    }
    list_.unlink(*this);
    state_ = state::cancelled;
    if (list_.empty()) {
      list_.emptied_(list_.owner_);
    }
  }
  cancelled_ = true;
  if (arrive()) {
    // Through the home's queue even on the home: this callback must return before the
    // coroutine may destroy it.
    resume_later_on(home_, coroutine_, owner_);
  }
}

void sync_wait::withdraw() noexcept {
  if (!coroutine_ || resumed_) {
    return;  // never waited, or went on normally
  }
  resumed_ = true;
  stop_watch_.reset();  // waits for a stop callback running on another thread
  bool give = false;
  {
    std::lock_guard guard(list_.lock());
    if (state_ == state::waiting) {
      list_.unlink(*this);
      state_ = state::cancelled;
      if (list_.empty()) {
        list_.emptied_(list_.owner_);
      }
    } else if (state_ == state::granted) {
      give = give_back_ != nullptr;
    }
  }
  if (give) {
    const nested_wake no_nested_runs(kMaxNestedWakes);
    give_back_(*this);
  }
}

}  // namespace cyan::dispatch::detail
