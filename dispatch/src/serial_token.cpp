#include <cassert>
#include <utility>

#include "cyan/dispatch/serial_token.h"

namespace cyan::dispatch::detail {

void serial_tracker::wait_released() {
  std::unique_lock lock(mutex_);
  released_.wait(lock, [this] { return parked_ == 0 && notifying_ == 0; });
}

bool serial_tracker::released() {
  const std::lock_guard lock(mutex_);
  return parked_ == 0;
}

void serial_tracker::add() {
  const std::lock_guard lock(mutex_);
  ++parked_;
}

void serial_tracker::remove() {
  std::unique_lock lock(mutex_);
  if (--parked_ != 0) {
    return;
  }
  if (on_released_ != nullptr) {
    ++notifying_;  // keeps wait_released() (and so the executor) waiting for the call
    lock.unlock();
    on_released_(context_);  // unlocked: it may call released()
    lock.lock();
    --notifying_;
  }
  if (parked_ == 0 && notifying_ == 0) {
    released_.notify_all();
  }
}

namespace {

// Hand-overs deferred on this thread. A hand-over calls an executor's poster; if the poster
// throws, the step job it was given is destroyed unrun inside that call, and its destructor must
// hand the turn on again. Doing that recursively would nest one set of frames per cancelled
// task (thousands, for a stopped executor with a long queue), so a hand-over started while
// another is running on the same thread is queued here and run by the outer one.
thread_local bool handing_over = false;
thread_local serial_state* deferred = nullptr;

}  // namespace

// The job that holds a token's turn: running it runs the current task, destroying it unrun
// cancels that task; either way the turn then passes to the next task. One pointer wide, so
// executors store it without allocating.
class serial_state::step {
 public:
  explicit step(serial_state* state) noexcept : state_(state) {}
  step(step&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  step& operator=(step&&) = delete;

  ~step() {
    if (state_ != nullptr) {
      state_->current_ = nullptr;  // cancels an awaitable task
      pass_turn(state_);
    }
  }

  void operator()() {
    serial_state* state = std::exchange(state_, nullptr);
    struct pass_on_exit {
      serial_state* state;
      ~pass_on_exit() { pass_turn(state); }
    } pass{ state };
    // Destroyed before `pass`: the task's captures are gone before the next task starts.
    unique_function<void()> task = std::move(state->current_);
    task();  // an exception propagates to the executor after the turn has passed
  }

 private:
  static void pass_turn(serial_state* state) noexcept {
    state->finish_one();
    state->release();
  }

  serial_state* state_;
};

void serial_state::submit(unique_function<void()> task, serial_poster poster,
                          serial_tracker* tracker) {
  if (tracker != nullptr) {
    tracker->add();
  }
  try {
    queue_.push(item{ std::move(task), std::move(poster), tracker });
  } catch (...) {
    if (tracker != nullptr) {
      tracker->remove();
    }
    throw;
  }
  // acq_rel: the release publishes the pushed item to the finish_one() that will pop it; the
  // acquire pairs with finish_one()'s release when the token just went idle, ordering the
  // previous task before this one.
  if (count_.fetch_add(1, std::memory_order_acq_rel) == 0) {
    retain();  // released by schedule_hand_over()
    schedule_hand_over(this);
  }
}

void serial_state::finish_one() noexcept {
  // acq_rel: the release orders the finished task before whoever moves the count from 0 next
  // (see submit()); the acquire pairs with submit()'s release, making its pushed item visible.
  if (count_.fetch_sub(1, std::memory_order_acq_rel) > 1) {
    retain();  // released by schedule_hand_over()
    schedule_hand_over(this);
  }
}

void serial_state::schedule_hand_over(serial_state* state) noexcept {
  if (handing_over) {
    state->deferred_next_ = std::exchange(deferred, state);
    return;
  }
  handing_over = true;
  while (state != nullptr) {
    state->hand_over_next();
    state->release();
    state = deferred;
    if (state != nullptr) {
      deferred = state->deferred_next_;
    }
  }
  handing_over = false;
}

void serial_state::hand_over_next() noexcept {
  item next;
  [[maybe_unused]] bool popped = queue_.try_pop(next);
  assert(popped);  // count_ > 0 guarantees an item: every push precedes its count increment
  current_ = std::move(next.task);
  retain();  // released by the step
  try {
    next.poster(unique_function<void()>(step(this)));
  } catch (...) {
    // The executor refused the step (e.g. it stopped): the step was destroyed unrun, which
    // cancelled the task and passed the turn on (deferred to schedule_hand_over()'s loop).
  }
  if (next.tracker != nullptr) {
    next.tracker->remove();
  }
}

}  // namespace cyan::dispatch::detail
