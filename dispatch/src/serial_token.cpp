#include <cassert>
#include <cstddef>
#include <exception>
#include <utility>

#include "cyan/dispatch/detail/destroy_task.h"
#include "cyan/dispatch/serial_token.h"

namespace cyan::dispatch::detail {

namespace {

// Token tasks a step runs inline, one after the other, before it hands the turn back to the
// executor's queue: keeps a busy token from monopolising a worker.
constexpr std::size_t kInlineBatch = 64;

// Posts deferred on this thread. A post calls an executor's poster; if the poster throws, the
// step it was given is destroyed unrun inside that call, and its destructor must pass the turn
// on again. Doing that recursively would nest one set of frames per cancelled task (thousands,
// for a stopped executor with a long queue), so a post started while another is running on the
// same thread is queued here and run by the outer one.
thread_local bool posting = false;
thread_local serial_state* deferred = nullptr;

}  // namespace

// The job that holds a token's turn, on the executor identified by `here` (its tracker).
// Running it runs the current task and then, while the next one belongs to the same executor
// (and the batch lasts), that one too; destroying it unrun cancels the current task. Either
// way the turn then passes on. Two pointers wide, so executors store it without allocating.
// What a token task's destructor throws goes to the executor's error path (its tracker's): as
// the step's exception when the step ran the task, else through serial_tracker::report(), for
// the step's own destructor must not throw (executors destroy it in noexcept places).
class serial_state::step {
 public:
  step(serial_state* state, serial_tracker* here) noexcept : state_(state), here_(here) {}
  step(step&& other) noexcept : state_(std::exchange(other.state_, nullptr)), here_(other.here_) {}
  step& operator=(step&&) = delete;

  ~step() {
    if (state_ != nullptr) {
      // Cancels the task (an awaitable one reports task_cancelled).
      destroy_task(state_->current_.task, [this](std::exception_ptr error) {
        serial_tracker::report(here_, std::move(error));
      });
      state_->finish_one();
      state_->release();
    }
  }

  void operator()() {
    serial_state* state = std::exchange(state_, nullptr);
    for (std::size_t ran = 1;; ++ran) {
      state->run_current(here_);  // throws after passing the turn on
      if (!state->advance()) {
        break;  // idle
      }
      if (ran == kInlineBatch || here_ == nullptr || state->current_.tracker != here_ ||
          !here_->inlining()) {
        state->retain();  // released by schedule_post()
        schedule_post(state);
        break;
      }
      here_->remove();  // handed over to this very executor, now
    }
    state->release();
  }

 private:
  serial_state* state_;
  serial_tracker* here_;
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
  // acq_rel: the release publishes the pushed item to whoever takes it next; the acquire pairs
  // with the decrement that made the token idle, ordering the previous task before this one.
  if (count_.fetch_add(1, std::memory_order_acq_rel) == 0) {
    take_next();
    retain();  // released by schedule_post()
    schedule_post(this);
  }
}

void serial_state::run_current(const serial_tracker* here) {
  unique_function<void()> task = std::move(current_.task);
  try {
    task();
    task.reset();  // before the turn passes: the task's captures are gone before the next starts
  } catch (...) {
    // The task threw (its destructor's exception, if it throws too, goes to `here`), or its
    // destructor did: pass the turn on, then let the executor report the first exception.
    destroy_task(
        task, [here](std::exception_ptr error) { serial_tracker::report(here, std::move(error)); });
    finish_one();
    release();  // the step's reference
    throw;
  }
}

void serial_state::finish_one() noexcept {
  if (advance()) {
    retain();  // released by schedule_post()
    schedule_post(this);
  }
}

bool serial_state::advance() noexcept {
  // acq_rel: the release orders the finished task before the next one (whoever takes the turn
  // or moves the count from 0); the acquire pairs with submit()'s release, making its pushed
  // item visible to the pop below.
  if (count_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    return false;
  }
  take_next();
  return true;
}

void serial_state::take_next() noexcept {
  [[maybe_unused]] bool popped = queue_.try_pop(current_);
  assert(popped);  // count_ > 0 guarantees an item: every push precedes its count increment
}

void serial_state::schedule_post(serial_state* state) noexcept {
  if (posting) {
    state->deferred_next_ = std::exchange(deferred, state);
    return;
  }
  posting = true;
  while (state != nullptr) {
    state->post_current();
    state->release();
    state = deferred;
    if (state != nullptr) {
      deferred = state->deferred_next_;
    }
  }
  posting = false;
}

void serial_state::post_current() noexcept {
  // Read before the post: once posted, the step may run (and move the turn on) at once.
  serial_tracker* tracker = current_.tracker;
  serial_poster poster = std::move(current_.poster);
  retain();  // released by the step
  try {
    poster(unique_function<void()>(step(this, tracker)));
  } catch (...) {
    // The executor refused the step (e.g. it stopped): the step was destroyed unrun, which
    // cancelled the task and passed the turn on (deferred to schedule_post()'s loop).
  }
  if (tracker != nullptr) {
    tracker->remove();
  }
}

}  // namespace cyan::dispatch::detail
