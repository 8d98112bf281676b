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
//   2. run:        take tasks: the rest of its own claim, else a claim from the shared queue (one
//                  task, or a batch from a backlog: see "Batches"), else one stolen from another
//                  worker's claim; at most kBatch before it looks at its inbox and loop again,
//                  plus what is left of its claim; a take that leaves tasks behind while no
//                  worker spins wakes an idle worker for them;
//   3. spin:       when the queue is empty, poll it for up to kSpin, if fewer than
//                  max_spinners_ workers already do;
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
// Sleep. A worker marks itself idle (its flag, then sleepers_, seq_cst) and then asks
// has_work(): its flag, the queue and every worker's local_count, seq_cst. A producer first
// makes its work visible (a push's seq_cst claim, a seq_cst store of local_count), then reads
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
// How long an idle worker keeps looking at the queue before it may sleep: long enough to
// bridge the gaps of a producer posting a stream, short enough to give the CPU back soon.
constexpr std::chrono::microseconds kSpin{ 50 };

}  // namespace

std::size_t pool_core::worker_state::run_elsewhere(handler_thread&) noexcept {
  return core->run_batch(*this);
}

executor_ref pool_core::worker_state::home() noexcept {
  return core->ref();
}

bool pool_core::worker_state::has_work(handler_thread&) noexcept {
  // seq_cst: see "Sleep". A flag cleared by a producer means "look again".
  return !idle.load(std::memory_order_seq_cst) || !core->queue_.empty() || core->any_local();
}

// Steps 1-4 of a worker's round (see "A worker's round").
std::size_t pool_core::run_batch(worker_state& self) noexcept {
  reclaim(self);
  std::size_t ran = run_available(self);
  while (ran == 0 && spin_for_work()) {
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
// (see "Batches"), even past kBatch.
std::size_t pool_core::run_available(worker_state& self) noexcept {
  task next;
  std::size_t ran = 0;
  while (ran < kBatch && take_next(self, next)) {
    run_one(next);
    ++ran;
  }
  while (take_local(self, next, false)) {
    run_one(next);
    ++ran;
  }
  return ran;
}

// The next task for `self`: the rest of its own claim, a claim from the shared queue, or one
// stolen from another worker's claim.
bool pool_core::take_next(worker_state& self, task& out) noexcept {
  return take_local(self, out, false) || claim(self, out) || steal(self, out);
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
    if (take_local(states_[(first + k) % count], out, true)) {
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
bool pool_core::spin_for_work() noexcept {
  // relaxed: a first look; the CAS decides.
  std::uint32_t spinning = spinners_.value.load(std::memory_order_relaxed);
  do {
    if (spinning >= max_spinners_) {
      return false;
    }
  } while (!spinners_.value.compare_exchange_weak(spinning, spinning + 1, std::memory_order_seq_cst,
                                                  std::memory_order_relaxed));
  const bool found = poll_queue();
  spinners_.value.fetch_sub(1, std::memory_order_seq_cst);  // before the take: see "Spinning"
  return found;
}

bool pool_core::poll_queue() const noexcept {
  // Between two looks the worker pauses, twice as long after each look up to kMaxPauses: a
  // look reads the queue's tail, which takes that cache line from a producer that is about to
  // push, so a worker waiting for a stream of posts looks less often the longer it waits (and
  // then finds several tasks at once). The clock is read every kLooksPerCheck looks: reading it
  // costs more than a look. Yields now and then, for the producer may share this worker's core.
  constexpr unsigned kMinPauses = 4;
  constexpr unsigned kMaxPauses = 64;
  constexpr unsigned kLooksPerCheck = 8;
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  unsigned pauses = kMinPauses;
  for (unsigned look = 1;; ++look) {
    if (!queue_.empty() || any_local()) {
      return true;
    }
    for (unsigned pause = 0; pause < pauses; ++pause) {
      cpu_relax();
    }
    pauses = std::min(pauses * 2, kMaxPauses);
    if (look % kLooksPerCheck != 0) {
      continue;
    }
    if (queue_.sealed() || std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::yield();
  }
}

void pool_core::mark_idle(worker_state& self) noexcept {
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
