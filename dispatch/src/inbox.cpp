#include "cyan/dispatch/detail/inbox.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>

#include "cyan/dispatch/errors.h"

namespace cyan::dispatch::detail {
namespace {

// Ids start at 1: 0 marks an empty producer cache slot. Never reused, so a stale cache entry
// for a destroyed inbox can never match a new one.
std::atomic<std::uint64_t> next_inbox_id{ 1 };

}  // namespace

inbox::inbox() : id_(next_inbox_id.fetch_add(1, std::memory_order_relaxed)) {  // relaxed: a counter
  asymmetric_fence::enable();
}

inbox::~inbox() {
  // The thread has finished and, by contract, nobody posts any more: free what the lanes hold
  // and let their producers' caches forget them.
  for (inbox_lane* lane : registry_) {
    lane->free_blocks();
    lane->mark_target_dead();
    inbox_lane::release(lane);
  }
}

// ---- producer side ------------------------------------------------------------------------

inbox::shared_window::shared_window(inbox& target) noexcept : target_(target) {
  // seq_cst: the store-load pair with state_ (see "No lost wake-up" in inbox.h).
  target_.shared_active_.fetch_add(1, std::memory_order_seq_cst);
}

inbox::shared_window::~shared_window() {
  // release: pairs with the seq_cst loads in anything_active(); whoever reads the count after
  // this decrement also sees what this window pushed.
  target_.shared_active_.fetch_sub(1, std::memory_order_release);
}

void inbox::post_shared(std::uint32_t refused, envelope::kind what, inbox_task task,
                        clock::time_point due, inbox_lane* lane) {
  std::uint32_t state;
  {
    const shared_window window(*this);
    state = state_.value.load(std::memory_order_seq_cst);  // see "No lost wake-up"
    if ((state & refused) != 0) {
      throw_refused(refused);
    }
    push_shared(envelope{ std::move(task), due, lane, what });
    if ((state & kSleeping) != 0) {
      begin_wake();
    }
  }
  if ((state & kSleeping) != 0) {
    end_wake();
  }
}

void inbox::push_shared(envelope&& item) {
  const bool counted = item.what != envelope::kind::open_lane;
  // relaxed: counters; the push below (a release) orders them before the consumer's pop.
  shared_pushed_.fetch_add(1, std::memory_order_relaxed);
  if (counted) {
    shared_posted_.fetch_add(1, std::memory_order_relaxed);
  }
  try {
    shared_.push(std::move(item));
  } catch (...) {
    shared_pushed_.fetch_sub(1, std::memory_order_relaxed);
    if (counted) {
      shared_posted_.fetch_sub(1, std::memory_order_relaxed);
    }
    throw;
  }
}

inbox_lane* inbox::open_lane() {
  auto lane = std::make_unique<inbox_lane>(id_);
  {
    const std::lock_guard lock(registry_mutex_);
    registry_.push_back(lane.get());
  }
  try {
    post_shared(kClosed, envelope::kind::open_lane, nullptr, {}, lane.get());
  } catch (...) {
    const std::lock_guard lock(registry_mutex_);
    std::erase(registry_, lane.get());
    throw;
  }
  return lane.release();
}

void inbox::throw_stopped() {
  throw executor_stopped("cyan::dispatch::handler_thread: post after stop()");
}

void inbox::throw_refused(std::uint32_t refused) {
  if (refused == kClosed) {
    throw executor_stopped("cyan::dispatch::handler_thread: work handed over after it finished");
  }
  throw_stopped();
}

void inbox::wake() noexcept {
  // acq_rel: only the caller that clears the flag sends the wake-up, once per sleep.
  if ((state_.value.fetch_and(~kSleeping, std::memory_order_acq_rel) & kSleeping) != 0) {
    owner_->wake_thread();
  }
}

void inbox::begin_wake() noexcept {
  // relaxed: what keeps this count visible to finish() is the release that follows it (the
  // window's end, or stop()'s seq_cst RMW), which finish() acquires before reading it.
  wakers_.fetch_add(1, std::memory_order_relaxed);
}

void inbox::end_wake() noexcept {
  wake();
  // release: pairs with the acquire load in finish(); the wake is done before the waker dies.
  wakers_.fetch_sub(1, std::memory_order_release);
}

void inbox::stop(bool discard) noexcept {
  begin_wake();  // before the RMW: a finish() that sees kStopped also sees this count
  const std::uint32_t bits = kStopped | (discard ? kDiscard : 0);
  if ((state_.value.fetch_or(bits, std::memory_order_seq_cst) & kSleeping) != 0) {
    end_wake();
  } else {
    wakers_.fetch_sub(1, std::memory_order_release);  // pairs with the load in finish()
  }
}

void inbox::notify() noexcept {
  bool sleeping;
  {
    const shared_window window(*this);
    sleeping = (state_.value.load(std::memory_order_seq_cst) & kSleeping) != 0;
    if (sleeping) {
      begin_wake();
    }
  }
  if (sleeping) {
    end_wake();
  }
}

inbox::counters inbox::read_counters() const {
  counters result;
  const std::lock_guard lock(registry_mutex_);
  // acquire: pairs with the release stores in run_task()/cancel_task(); every task counted there
  // was counted as posted before it was pushed, so the posted counts read next are not smaller.
  result.executed = executed_.load(std::memory_order_acquire);
  result.cancelled = cancelled_.load(std::memory_order_acquire);
  result.posted = retired_posted_ + shared_posted_.load(std::memory_order_relaxed);
  result.lanes = registry_.size();
  result.sleeps = sleeps_.load(std::memory_order_relaxed);
  result.naps = naps_.load(std::memory_order_relaxed);
  result.dear_fences = dear_fences_.load(std::memory_order_relaxed);
  for (const inbox_lane* lane : registry_) {
    result.posted += lane->posted();
  }
  return result;
}

// ---- consumer side ------------------------------------------------------------------------

std::size_t inbox::drain(std::size_t budget) noexcept {
  const std::size_t taken = drain_shared(budget);
  return taken + drain_lanes(budget);
}

std::size_t inbox::drain_shared(std::size_t budget) noexcept {
  // relaxed: a hint; an envelope whose count is not visible yet is taken in a later round
  // (prepare_sleep() and finish() look at the queue itself).
  if (shared_pushed_.load(std::memory_order_relaxed) == shared_popped_) {
    return 0;
  }
  std::size_t taken = 0;
  envelope item;
  while (taken < budget && shared_.try_pop(item)) {
    ++taken;
    ++shared_popped_;
    handle(item);
  }
  return taken;
}

std::size_t inbox::drain_lanes(std::size_t budget) noexcept {
  // take_task() leaves the task empty: the ring then destroys an empty slot, no closure.
  auto take = [this](inbox_task&& task) noexcept { take_task(task); };
  std::size_t taken = 0;
  inbox_lane** link = &lanes_;
  while (inbox_lane* lane = *link) {
    const std::size_t count = lane->consume(budget, take);
    taken += count;
    if (count < budget && lane->closed() && !lane->has_tasks()) {
      *link = lane->next_lane;  // the producer thread exited and its lane is empty
      retire(lane);
      continue;
    }
    link = &lane->next_lane;
  }
  return taken;
}

void inbox::handle(envelope& item) noexcept {
  switch (item.what) {
    case envelope::kind::task:
      take_task(item.task);
      return;
    case envelope::kind::delayed:
      if (discarding()) {
        cancel_task(item.task);
        return;
      }
      try {
        owner_->schedule(item.due, std::move(item.task));
      } catch (std::exception& error) {  // e.g. std::bad_alloc: the task cannot be kept
        cancel_task(item.task);
        owner_->report(error);
      }
      return;
    case envelope::kind::open_lane:
      item.lane->next_lane = lanes_;
      lanes_ = item.lane;
      return;
  }
}

void inbox::take_task(inbox_task& task) noexcept {
  if (discarding()) {
    cancel_task(task);
  } else {
    run_task(task);
  }
}

void inbox::retire(inbox_lane* lane) noexcept {
  {
    const std::lock_guard lock(registry_mutex_);
    std::erase(registry_, lane);
    retired_posted_ += lane->posted();
  }
  inbox_lane::release(lane);
}

bool inbox::looks_busy() const noexcept {
  // relaxed: a hint for spinning; prepare_sleep() decides with the real protocol.
  if (stop_is_due(state_.value.load(std::memory_order_relaxed)) ||
      shared_pushed_.load(std::memory_order_relaxed) != shared_popped_) {
    return true;
  }
  for (const inbox_lane* lane = lanes_; lane != nullptr; lane = lane->next_lane) {
    if (lane->has_tasks()) {
      return true;
    }
  }
  return false;
}

bool inbox::anything_active() const noexcept {
  // seq_cst loads: see "No lost wake-up" and "Stop" in inbox.h.
  bool active = shared_active_.load(std::memory_order_seq_cst) != 0;
  for (const inbox_lane* lane = lanes_; lane != nullptr; lane = lane->next_lane) {
    active = lane->posting() || active;
  }
  return active;
}

bool inbox::anything_queued() const noexcept {
  if (!shared_.empty()) {
    return true;
  }
  for (const inbox_lane* lane = lanes_; lane != nullptr; lane = lane->next_lane) {
    if (lane->has_tasks()) {
      return true;
    }
  }
  return false;
}

inbox::sleep_check inbox::prepare_sleep(bool (*extra_work)(void*) noexcept, void* context,
                                        sleep_fence fence, clock::duration* fence_took) noexcept {
  const std::uint32_t before = state_.value.fetch_or(kSleeping, std::memory_order_seq_cst);
  if (fence == sleep_fence::heavy) {
    const clock::time_point start = fence_took != nullptr ? clock::now() : clock::time_point{};
    asymmetric_fence::heavy();  // pairs with the producers' light_store() of `active`
    if (fence_took != nullptr) {
      *fence_took = clock::now() - start;
    }
  }
  // Flags first: a post seen finished here has its task visible to anything_queued().
  const bool active = anything_active();
  sleep_check result = sleep_check::may_sleep;
  if (stop_is_due(before) || anything_queued() || (extra_work != nullptr && extra_work(context))) {
    result = sleep_check::work;
  } else if (active) {
    result = sleep_check::producer_busy;  // a post is between its flag and its push
  }
  if (result != sleep_check::may_sleep) {
    woke();
  }
  return result;
}

void inbox::woke() noexcept {
  // acquire: pairs with the seq_cst RMW of a stop() that saw kSleeping, so finish() sees its
  // wakers_ count. Clearing the flag publishes nothing (release is not needed).
  state_.value.fetch_and(~kSleeping, std::memory_order_acquire);
}

void inbox::finish() noexcept {
  // kStopped is set (we saw it) and kClosed is now: after this fence every post and hand-over
  // either shows as active below or sees its bit and throws (see "Stop" in inbox.h).
  state_.value.fetch_or(kClosed, std::memory_order_seq_cst);
  asymmetric_fence::heavy();
  for (;;) {
    // Looked at before draining: a post seen inactive here has pushed already (or will see
    // kStopped, a hand-over kClosed, and throw), so the drain below takes its task.
    const bool active = anything_active();
    const std::size_t taken = drain(std::numeric_limits<std::size_t>::max());
    if (taken == 0 && !active) {
      wait_for_wakers();
      return;
    }
    if (taken == 0) {
      std::this_thread::yield();  // a post is between its check and its push
    }
  }
}

void inbox::wait_for_wakers() const noexcept {
  // acquire: pairs with the release decrement in end_wake() and stop().
  while (wakers_.load(std::memory_order_acquire) != 0) {
    std::this_thread::yield();  // a waker is between its window and its wake syscall
  }
}

void inbox::mark_finished() noexcept {
  state_.value.fetch_or(kFinished, std::memory_order_seq_cst);
}

void inbox::report(std::exception_ptr error) noexcept {
  try {
    std::rethrow_exception(std::move(error));
  } catch (std::exception& e) {
    owner_->report(e);
  } catch (...) {
    report_unknown();
  }
}

void inbox::report_unknown() noexcept {
  std::runtime_error error("unknown exception");
  owner_->report(error);
}

}  // namespace cyan::dispatch::detail
