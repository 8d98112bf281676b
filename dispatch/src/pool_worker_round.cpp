// The pool's side of a worker's round: claim, steal, spin, go idle; and waking an idle worker.

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>

#include "pool_core.h"

// A worker's round. A pool worker is a handler_thread whose idle_hook is its worker_state; its
// round (see "The round" in handler_thread_runtime.cpp) calls run_elsewhere() when its own inbox
// is empty:
//   1. reclaim:    clear its own idle flag, if a producer has not already;
//   2. run:        take tasks: its next task (see "The next task"), else its local deque
//                  (newest first: see pool_local.cpp), else the rest of its own claim, else a
//                  claim from the shared queue (one task, or a batch from a backlog: see
//                  "Batches"), else a job stolen from another worker's deque, else one stolen
//                  from another worker's claim, else another's next task that waited too long
//                  (after 61 local takes in a row the shared queue goes first: "Fairness" in
//                  pool_local.cpp); at most kBatch before it looks at its inbox and loop again,
//                  plus what is left of its claim; a take that leaves tasks behind while no
//                  worker spins wakes an idle worker for them;
//   3. spin:       when the queue is empty, poll it (and the others' next tasks) for up to
//                  the worker's spin budget (its spin_governor: up to 50 µs, adapting, none
//                  while the worker keeps losing its CPU), if fewer than max_spinners_
//                  workers already do;
//   4. mark_idle:  then set its idle flag and count itself in sleepers_, and go back to its
//                  handler_thread, which sleeps unless has_work() says otherwise.
//
// Spinning. Polling saves the wake-up (a syscall for the producer and a wake-up's latency for
// the task) when work follows soon, but a poller takes a CPU that a producer may need: with
// more runnable threads than cores, every extra poller slows the thread it waits for. So at
// most max_spinners_ (half the workers, at least one) poll at once, as in Go's scheduler; the
// rest sleep at once. A post wakes an idle worker only when one is idle and none spins (a
// spinner will find the task), and a spinner that finds work stops counting as one before it
// takes a task, so the task's push is either seen by the producer's look at spinners_ (and
// woken for) or ordered before the spinner's take, which then sees it, and the tasks it leaves
// behind. With no idle worker there is nobody to wake: each worker looks at the queue again
// before it sleeps (see "Sleep").
//
// Batches. When several workers take from one queue on different CPUs, a claim per task makes
// them take turns on the head's cache line for every task. So a worker that sees a backlog
// claims up to kMaxClaim tasks at once, at most one in 2 × workers of the tasks it sees (the
// rest stays for the others), with one claim. Those beyond the first wait in its local array,
// which it empties before it leaves run_available(): a worker that goes back to its inbox, or
// that a stop reaches, holds none. An idle worker steals from the back of another's array, and
// has_work() looks at every array, so a claimed task never waits behind a busy worker while
// another is idle; a claim that leaves tasks in the array wakes an idle worker as a take that
// leaves tasks in the queue does.
//
// The next task. A wake-up that a task causes on its own pool (a lock handed over, an item
// handed to a waiting receiver: sync_wait::wake() through resume_next) goes to the waking
// worker's next-task slot, not to the shared queue: the waker most often waits in turn right
// after it (for the lock back, for the next item), and then its worker runs the woken task at
// once, on the core that holds the lock's and the item's cache lines. Through the shared queue
// an idle worker would take it instead, and every hand-over would move the lines between the
// cores (several hundred ns each here when the host is in its slow phase), as Go's runnext and
// Tokio's LIFO slot avoid. One task per slot: a second put moves the first to the shared queue.
// The worker takes its slot before anything else, but
//   - no task waits behind a busy worker while another is idle: the put wakes an idle worker
//     as a post does, and an idle worker that sees the same task in another's slot for
//     kNextGrace takes it (the owner is busy with a long task, or preempted); a slot whose task
//     keeps changing is a worker that keeps running them, and left alone;
//   - nor behind a chain of next tasks: a round that starts with a task in the slot and work in
//     the shared queue or in its own deque sends the slot's task to the back of the shared
//     queue first, so older tasks go before it;
//   - nor is it lost to a stop: after the seal puts go to the queue, a worker that leaves its
//     round holds none once the queue is sealed, and try_finish() does not close while a slot
//     holds a task.
// The sleep check (has_work) watches another worker's slot for up to kNextGrace: if the same
// task stays it is taken; if it changes, the owner ran it, and the put of any later one reads
// sleepers_ after this worker's mark (the put's seq_cst store of next_mark comes after the
// check's read of the older mark), so it wakes this worker as a post would.
//
// Sleep. A worker marks itself idle (its flag, then sleepers_, seq_cst) and then asks
// has_work(): its flag, the queue, every worker's local_count and every deque, seq_cst. A producer
// first makes its work visible (a push's seq_cst claim, a seq_cst store of local_count), then reads
// sleepers_ and claims an idle worker's flag (seq_cst). In the total order of these, either the
// producer reads after the mark, sees the worker idle and wakes it, or the worker's has_work()
// comes after the producer's publication and sees the work. handler_thread's own announcement
// then guards the sleep itself (see idle_hook.h).
//

namespace cyan::dispatch::detail {
namespace {

// Tasks a worker runs from the shared queue before it looks at its own inbox (and its loop's
// timers) again.
constexpr std::size_t kBatch = 64;
// How long another worker's next task may wait in its slot, unchanged, before an idle worker
// takes it (see "The next task"): many hand-overs long, shorter than a wake-up.
constexpr std::chrono::microseconds kNextGrace{ 4 };

}  // namespace

constinit thread_local pool_core::worker_state* pool_core::running_worker_ = nullptr;

std::size_t pool_core::worker_state::run_elsewhere(handler_thread&) noexcept {
  return core->run_batch(*this);
}

executor_ref pool_core::worker_state::home() noexcept {
  return core->ref();
}

bool pool_core::worker_state::has_work(handler_thread&) noexcept {
  // seq_cst: see "Sleep". A flag cleared by a producer means "look again".
  return !idle.load(std::memory_order_seq_cst) || !core->queue_.empty() || core->any_local() ||
         core->any_deque() || next_mark.load(std::memory_order_seq_cst) != kNoNext ||
         core->next_task_stuck(*this);
}

// Steps 1-4 of a worker's round (see "A worker's round").
std::size_t pool_core::run_batch(worker_state& self) noexcept {
  if (this_thread_worker == nullptr) {  // the worker's first round
    this_thread_worker = &self;
    self.random = 0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(&self - states_.get()) + 1);
  }
  reclaim(self);
  std::size_t ran = run_available(self);
  while (ran == 0 && spin_for_work(self)) {
    ran = run_available(self);  // another worker may have taken what the spin saw
  }
  if (ran == 0) {
    if (queue_.sealed()) {
      try_finish();
    }
    mark_idle(self);
  }
  return ran;
}

// Step 2 of a worker's round. Its own claimed tasks go first and are all run before it returns
// (see "Batches"), even past kBatch. Its next task (see "The next task") and its deque may keep
// tasks when it returns, unless the queue is sealed: then it runs all of its own first (a task
// it runs may push more: those run too), so that a worker that leaves its round holds none.
std::size_t pool_core::run_available(worker_state& self) noexcept {
  // relaxed: a hint; an older task missed here goes first in a later round. The deque counts
  // as older work too: the slot goes before it in every take, so a chain of hand-overs would
  // starve the tasks the chain itself posts.
  if (self.next_mark.load(std::memory_order_relaxed) != kNoNext &&
      (!queue_.empty() || !self.deque.empty())) {
    requeue_next(self);  // older tasks first (see "The next task")
  }
  running_worker_ = &self;
  work_item item;
  std::size_t ran = 0;
  while (ran < kBatch && take_next(self, item)) {
    run_item(item);
    ++ran;
  }
  running_worker_ = nullptr;  // pushes from here on go to the shared queue
  while (take_local(self, item.work, false)) {
    count(self.counters.from_local);
    run_one(item.work);
    ++ran;
  }
  if (queue_.sealed()) {
    while (take_own(self, item)) {  // pushes go to the queue now: this ends
      run_item(item);
      ++ran;
    }
  }
  return ran;
}

// The next task for `self`, in this order (see "Fairness" in pool_local.cpp for the first
// step): its next-task slot, its deque, the rest of its own claim, a claim from the shared
// queue, a job stolen from another worker's deque, one stolen from another's claim, or
// another's next task that waited there too long.
bool pool_core::take_next(worker_state& self, work_item& out) noexcept {
  constexpr std::uint32_t kLocalStreak = 61;
  // relaxed: only this worker fills its batch array; a claim must not overwrite one.
  if (self.local_streak >= kLocalStreak && self.local_count.load(std::memory_order_relaxed) == 0) {
    self.local_streak = 0;
    if (claim(self, out.work)) {
      return true;
    }
  }
  if (take_own(self, out)) {
    ++self.local_streak;
    return true;
  }
  self.local_streak = 0;
  if (claim(self, out.work) || steal_job(self, out)) {
    return true;
  }
  if (steal(self, out.work) || steal_stuck_next(self, out.work)) {
    count(self.counters.stolen);
    return true;
  }
  return false;
}

// A resumption's wake-up caused on this pool (see "The next task"): into the slot of the
// worker running a task on this thread, else like any hand-over.
void pool_core::resume_next(void* self, task&& job) noexcept {
  auto* core = static_cast<pool_core*>(self);
  worker_state* worker = running_worker_;
  if (worker == nullptr || worker->core != core || core->queue_.sealed()) {
    resume_later(self, std::move(job));
    return;
  }
  core->put_next(*worker, std::move(job));
}

// The slot without a lock (see "The next task"): only the worker fills it, when it is
// empty; whoever moves a task out first claims it in next_mark (the worker: to kNoNext; an idle
// worker: to kTakingNext, then kNoNext once moved).
void pool_core::put_next(worker_state& self, task&& job) noexcept {
  task displaced;
  std::uint64_t mark = self.next_mark.load(std::memory_order_acquire);
  // acquire: the task is the worker's once claimed.
  if (mark != kNoNext && (mark == kTakingNext || !self.next_mark.compare_exchange_strong(
                                                     mark, kNoNext, std::memory_order_acquire))) {
    wait_while_taken(self);  // an idle worker is moving the slot's task out
  } else if (mark != kNoNext) {
    displaced = std::move(self.next);
  }
  self.next = std::move(job);
  self.puts += 2;
  // seq_cst: published before the look at the sleepers in wake_unless_spinning() (see "Sleep");
  // releases the task to whoever claims it.
  self.next_mark.store(self.puts, std::memory_order_seq_cst);
  if (displaced) {
    resume_later(this, std::move(displaced));  // it wakes a worker if needed
  }
  wake_unless_spinning();  // an idle worker takes it if this one stays busy
}

bool pool_core::take_own_next(worker_state& self, task& out) noexcept {
  // relaxed: the worker's own stores; an idle worker's claim is decided by the exchange.
  std::uint64_t mark = self.next_mark.load(std::memory_order_relaxed);
  if (mark == kNoNext || mark == kTakingNext ||
      !self.next_mark.compare_exchange_strong(mark, kNoNext, std::memory_order_acquire)) {
    return false;  // empty, or an idle worker took it
  }
  out = std::move(self.next);
  return true;
}

// Until the idle worker that claimed the slot's task has moved it out: a task's move, unless
// that worker was preempted meanwhile.
void pool_core::wait_while_taken(const worker_state& self) noexcept {
  // acquire: the idle worker's move is done before the slot is filled again.
  for (unsigned look = 1; self.next_mark.load(std::memory_order_acquire) == kTakingNext; ++look) {
    if (look % 64 == 0) {
      std::this_thread::yield();
    } else {
      cpu_relax();
    }
  }
}

// The slot's task to the back of the shared queue, behind the tasks already there.
void pool_core::requeue_next(worker_state& self) noexcept {
  task next;
  if (take_own_next(self, next)) {
    resume_later(this, std::move(next));
  }
}

// Takes the next task an idle look found stuck in another worker's slot (next_waits_too_long()
// or next_task_stuck()), if that very task is still there.
bool pool_core::steal_stuck_next(worker_state& self, task& out) noexcept {
  if (!std::exchange(self.watched_stuck, false)) {
    return false;
  }
  worker_state& owner = states_[self.watched];
  std::uint64_t mark = std::exchange(self.watched_mark, kNoNext);
  // acquire: the task, which the put released.
  if (!owner.next_mark.compare_exchange_strong(mark, kTakingNext, std::memory_order_acquire)) {
    return false;  // its worker ran it meanwhile
  }
  out = std::move(owner.next);
  owner.counters.taken_by_thieves.fetch_add(1, std::memory_order_relaxed);  // a count only
  // release: the move is done before the worker fills the slot again (wait_while_taken()).
  owner.next_mark.store(kNoNext, std::memory_order_release);
  return true;
}

// A spinner's look at the other workers' slots, at time `now`: whether one has held the same
// task for kNextGrace (then steal_stuck_next() may take it). Remembers the first task it sees.
bool pool_core::next_waits_too_long(worker_state& self,
                                    std::chrono::steady_clock::time_point now) noexcept {
  const std::size_t count = worker_count_;
  const auto first = static_cast<std::size_t>(&self - states_.get());
  for (std::size_t k = 1; k < count; ++k) {
    const std::size_t other = (first + k) % count;
    // relaxed: a hint; steal_stuck_next()'s exchange decides.
    const std::uint64_t mark = states_[other].next_mark.load(std::memory_order_relaxed);
    if (mark == kNoNext || mark == kTakingNext) {
      continue;  // empty, or another idle worker takes it
    }
    if (other == self.watched && mark == self.watched_mark) {
      self.watched_stuck = now - self.watched_since >= kNextGrace;
      return self.watched_stuck;
    }
    self.watched = other;
    self.watched_mark = mark;
    self.watched_since = now;
    return false;
  }
  self.watched_mark = kNoNext;
  return false;
}

// The sleep check's look at the other workers' slots (see "The next task"): watches each
// task found there for up to kNextGrace; true when one stays.
bool pool_core::next_task_stuck(worker_state& self) noexcept {
  const std::size_t count = worker_count_;
  const auto first = static_cast<std::size_t>(&self - states_.get());
  for (std::size_t k = 1; k < count; ++k) {
    const std::size_t other = (first + k) % count;
    const std::atomic<std::uint64_t>& slot = states_[other].next_mark;
    // seq_cst: see "Sleep" and "The next task".
    const std::uint64_t mark = slot.load(std::memory_order_seq_cst);
    if (mark == kNoNext || mark == kTakingNext) {
      continue;  // empty, or another idle worker takes it
    }
    const auto deadline = std::chrono::steady_clock::now() + kNextGrace;
    constexpr unsigned kLooksPerCheck = 8;
    for (unsigned look = 1; slot.load(std::memory_order_relaxed) == mark; ++look) {
      cpu_relax();
      if (look % kLooksPerCheck == 0 && std::chrono::steady_clock::now() >= deadline) {
        self.watched = other;
        self.watched_mark = mark;
        self.watched_stuck = true;
        return true;
      }
    }
  }
  return false;
}

bool pool_core::any_next() const noexcept {
  for (std::size_t i = 0; i < worker_count_; ++i) {
    if (states_[i].next_mark.load(std::memory_order_seq_cst) != kNoNext) {
      return true;
    }
  }
  return false;
}

bool pool_core::take_local(worker_state& state, task& out, bool from_back) noexcept {
  // relaxed: a hint; the mutex decides.
  if (state.local_count.load(std::memory_order_relaxed) == 0) {
    return false;
  }
  const std::lock_guard lock(state.local_mutex);
  if (state.begin == state.end) {
    return false;
  }
  out = std::move(state.local[from_back ? --state.end : state.begin++]);
  // seq_cst: see "Sleep" (has_work() reads it).
  state.local_count.store(state.end - state.begin, std::memory_order_seq_cst);
  return true;
}

// Takes one task, or a batch from a backlog (see "Batches"): the first goes to `out`, the rest
// to self.local, where an idle worker can steal them.
bool pool_core::claim(worker_state& self, task& out) noexcept {
  task batch[kMaxClaim];
  bool more = false;
  const std::size_t share = 2 * worker_count_;
  const std::size_t n = queue_.try_pop_many(batch, kMaxClaim, share, &more, &self.tail);
  if (n == 0) {
    return false;
  }
  out = std::move(batch[0]);
  count(self.counters.from_injection);
  if (n > 1) {
    const std::lock_guard lock(self.local_mutex);
    for (std::size_t i = 1; i < n; ++i) {
      self.local[i - 1] = std::move(batch[i]);
    }
    self.begin = 0;
    self.end = n - 1;
    // seq_cst: published before the look at the sleepers in wake_unless_spinning() (see "Sleep").
    self.local_count.store(n - 1, std::memory_order_seq_cst);
  }
  if (more || n > 1) {
    wake_unless_spinning();  // the tasks left behind need a worker too (see "Spinning")
  }
  return true;
}

// Takes the last task of another worker's claim: that worker is busy with an earlier one.
bool pool_core::steal(worker_state& self, task& out) noexcept {
  const std::size_t count = worker_count_;
  const auto first = static_cast<std::size_t>(&self - states_.get());
  for (std::size_t k = 1; k < count; ++k) {
    worker_state& victim = states_[(first + k) % count];
    if (take_local(victim, out, true)) {
      victim.counters.taken_by_thieves.fetch_add(1, std::memory_order_relaxed);  // a count only
      return true;
    }
  }
  return false;
}

bool pool_core::any_local() const noexcept {
  for (std::size_t i = 0; i < worker_count_; ++i) {
    // seq_cst: see "Sleep".
    if (states_[i].local_count.load(std::memory_order_seq_cst) != 0) {
      return true;
    }
  }
  return false;
}

void pool_core::run_one(task& t) noexcept {
  // relaxed: a late-seen discard only lets one more task run, as if it had started earlier.
  if (!discarding_.load(std::memory_order_relaxed)) {
    try {
      t();
    } catch (...) {
      report(std::current_exception());
    }
  }
  // The closure's captures go now, not when the next task is popped.
  destroy_task(t, [this](std::exception_ptr error) { report(std::move(error)); });
}

// Step 3 of a worker's round. Returns whether the queue showed work; the worker no longer
// counts as a spinner then (see "Spinning").
bool pool_core::spin_for_work(worker_state& self) noexcept {
  if (!self.spin.start_idle()) {
    return false;  // it rests: it lost its CPU lately (see detail/spin_governor.h)
  }
  // relaxed: a first look; the CAS decides.
  std::uint32_t spinning = spinners_.value.load(std::memory_order_relaxed);
  do {
    if (spinning >= max_spinners_) {
      return false;
    }
  } while (!spinners_.value.compare_exchange_weak(spinning, spinning + 1, std::memory_order_seq_cst,
                                                  std::memory_order_relaxed));
  const bool found = poll_queue(self);
  spinners_.value.fetch_sub(1, std::memory_order_seq_cst);  // before the take: see "Spinning"
  count(found ? self.counters.spins_found_work : self.counters.spins_found_nothing);
  return found;
}

// Polls for up to the worker's spin budget, which adapts (detail/spin_governor.h): it doubles
// when a poll found work and halves when one ran out, so on a machine with no CPU to spare the
// worker soon sleeps almost at once; a poll that finds the worker lost its CPU ends it, and the
// worker does not spin for a while.
bool pool_core::poll_queue(worker_state& self) noexcept {
  // Between two looks the worker pauses, twice as long after each look up to kMaxPauses: a
  // look reads the queue's tail, which takes that cache line from a producer that is about to
  // push, so a worker waiting for a stream of posts looks less often the longer it waits (and
  // then finds several tasks at once). The clock is read every kLooksPerCheck looks: reading it
  // costs more than a look. Yields now and then, for the producer may share this worker's core.
  constexpr unsigned kMinPauses = 4;
  constexpr unsigned kMaxPauses = 64;
  constexpr unsigned kLooksPerCheck = 8;
  const auto deadline = self.spin.start_spin(std::chrono::steady_clock::now());
  unsigned pauses = kMinPauses;
  for (unsigned look = 1;; ++look) {
    if (!queue_.empty() || any_local() || any_deque()) {
      self.spin.end_spin(true);
      return true;
    }
    for (unsigned pause = 0; pause < pauses; ++pause) {
      cpu_relax();
    }
    pauses = std::min(pauses * 2, kMaxPauses);
    if (look % kLooksPerCheck != 0) {
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (self.spin.lost_cpu(now)) {
      return false;  // it rests
    }
    if (next_waits_too_long(self, now)) {
      self.spin.end_spin(true);
      return true;  // another worker's next task waited too long (see "The next task")
    }
    if (queue_.sealed() || now >= deadline) {
      self.spin.end_spin(false);
      return false;
    }
    std::this_thread::yield();
  }
}

void pool_core::mark_idle(worker_state& self) noexcept {
  count(self.counters.parks);
  self.idle.store(true, std::memory_order_seq_cst);  // see "Sleep"
  sleepers_.value.fetch_add(1, std::memory_order_seq_cst);
}

void pool_core::reclaim(worker_state& self) noexcept {
  // relaxed load: a hint; the exchange decides who clears the flag and drops sleepers_.
  if (self.idle.load(std::memory_order_relaxed) &&
      self.idle.exchange(false, std::memory_order_seq_cst)) {
    sleepers_.value.fetch_sub(1, std::memory_order_relaxed);  // a count only: see "Sleep"
  }
}

// Claims one idle worker's flag and wakes it, unless no worker is idle or one spins (see "Sleep"
// and "Spinning"). sleepers_ first: it changes only when a worker goes to sleep or is woken,
// while spinners_ changes each time a spinner finds work, and a producer's load of a line that
// keeps changing misses the cache.
void pool_core::wake_unless_spinning() noexcept {
  if (sleepers_.value.load(std::memory_order_seq_cst) == 0 ||
      spinners_.value.load(std::memory_order_seq_cst) != 0) {
    return;
  }
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    worker_state& state = states_[i];
    // relaxed load: a hint (the seq_cst load of sleepers_ above acquired the flag's store). The
    // seq_cst exchange decides: one claimer per idle period, and it is ordered before the
    // worker's has_work() or before the wake's look at the worker's sleep (see "Sleep").
    if (state.idle.load(std::memory_order_relaxed) &&
        state.idle.exchange(false, std::memory_order_seq_cst)) {
      sleepers_.value.fetch_sub(1, std::memory_order_relaxed);  // a count only
      wake_if_sleeping(*workers_[i]);
      return;
    }
  }
}

}  // namespace cyan::dispatch::detail
