// The pool's local run queues: posts from pool tasks, the worker's own takes, stealing, the
// helping wait and the fork-join entry points (detail/fork_join.h); and stats().
//
// Local queues. Each worker owns a work_deque (work_deque.h). What a task running on a worker
// posts to the same pool (post(), a co_spawn, a schedule() onto it, a hand-over, a task_group
// child) and what join() forks goes to that worker's deque, boxed (boxed_task) or as the
// joiner's stack job; posts from any other thread, and a push that finds the deque full, go to
// the shared injection queue. Only a worker inside its round (running_worker_) pushes locally:
// it runs its deque empty before it leaves a round once the queue is sealed, so the stop
// protocol (pool_stop.cpp, which waits for every deque to be empty) loses nothing.
//
// Wake-ups. A local push is published with a seq_cst store (work_deque::push) and then wakes
// an idle worker unless one is searching (wake_unless_spinning(): the same protocol as a post
// to the shared queue, see "Sleep" in pool_worker_round.cpp, whose sleep check looks at every
// deque). A push that sees a searcher wakes nobody, so a thief whose steal leaves jobs in the
// victim's deque wakes an idle worker in turn (unless one searches), as a claim that leaves
// tasks in the shared queue does: a burst of pushes while one worker searches wakes a chain of
// thieves, one per job, not just the one. So a pool of N workers runs N pushed tasks at once: a
// task left in a busy worker's deque always has a searcher or a woken worker to steal it.
//
// Fairness. A worker takes from its own queues first (next-task slot, deque, batch claim), but
// after kLocalStreak (61, Go's number) local takes in a row it claims from the shared queue
// first, so a task that keeps spawning cannot starve posts from outside; and a round ends after
// kBatch tasks, so its inbox and loop timers are served. The next-task slot is capped as well:
// a round that starts with work in the shared queue sends the slot's task there first, and an
// idle worker steals a task that stays in a busy worker's slot.
//
// Stealing. An idle (or helping) worker steals one job from the top of another's deque,
// starting at a random victim so that thieves spread out; a spinner counts among the
// searchers (spinners_, at most half the workers), the rest sleep.
//
// Helping wait (help_until). A wait on a pool worker runs other tasks of the pool until the
// awaited thing is done: its own queues first, then the shared queue, then stolen ones. With
// nothing to run it yields kHelpYields times, then parks on the awaited thing's futex for
// 20 µs, doubling up to 1 ms: no wake-up is needed for progress (an idle worker does not count
// as asleep while it parks here, so nobody wakes it; it looks again within 1 ms), yet the
// awaited thing's completion wakes it at once. A post from outside the pool while every other
// worker is busy waits for the helper's next look (at most 1 ms). A helping wait outside the
// worker's round that returns after the seal first runs its deque empty (see help_until).

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "pool_core.h"

namespace cyan::dispatch::detail {

pool_core::worker_state* pool_core::local_worker() noexcept {
  worker_state* self = running_worker_;
  return self != nullptr && self->core == this ? self : nullptr;
}

bool pool_core::push_local(worker_state& self, task&& t) {
  auto* box = new boxed_task(*this, std::move(t));
  if (!self.deque.push(box)) {
    t = std::move(box->work);  // full: the caller sends it to the shared queue
    delete box;
    return false;
  }
  wake_unless_spinning();  // see "Wake-ups"
  return true;
}

void pool_core::execute_boxed(pool_job* job, bool discard) noexcept {
  auto* box = static_cast<boxed_task*>(job);
  pool_core* core = box->core;
  if (!discard) {
    try {
      box->work();
    } catch (...) {
      core->report(std::current_exception());
    }
  }
  destroy_task(box->work, [core](std::exception_ptr error) { core->report(std::move(error)); });
  delete box;
}

void pool_core::run_item(work_item& item) noexcept {
  if (pool_job* job = std::exchange(item.job, nullptr)) {
    // relaxed: as in run_one().
    job->execute(job, discarding_.load(std::memory_order_relaxed));
  } else {
    run_one(item.work);
  }
}

// The worker's own queues: its next-task slot, its deque, the rest of its batch claim.
bool pool_core::take_own(worker_state& self, work_item& out) noexcept {
  if (take_own_next(self, out.work)) {
    count(self.counters.next_task_hits);
    return true;
  }
  if ((out.job = self.deque.pop()) != nullptr || take_local(self, out.work, false)) {
    count(self.counters.from_local);
    return true;
  }
  return false;
}

// One job from the top of another worker's deque, trying each once from a random victim.
bool pool_core::steal_job(worker_state& self, work_item& out) noexcept {
  const std::size_t workers = worker_count_;
  if (workers < 2) {
    return false;
  }
  // xorshift64: cheap, and the worker's own state.
  self.random ^= self.random << 13;
  self.random ^= self.random >> 7;
  self.random ^= self.random << 17;
  const std::size_t start = static_cast<std::size_t>(self.random % workers);
  for (std::size_t k = 0; k < workers; ++k) {
    worker_state& victim = states_[(start + k) % workers];
    if (&victim == &self) {
      continue;
    }
    if ((out.job = victim.deque.steal()) != nullptr) {
      count(self.counters.stolen);
      victim.counters.taken_by_thieves.fetch_add(1, std::memory_order_relaxed);  // a count only
      if (!victim.deque.empty()) {
        wake_unless_spinning();  // the jobs left behind need a worker too (see "Wake-ups")
      }
      return true;
    }
  }
  return false;
}

bool pool_core::any_deque() const noexcept {
  for (std::size_t i = 0; i < worker_count_; ++i) {
    if (!states_[i].deque.empty()) {  // seq_cst loads: see "Sleep" in pool_worker_round.cpp
      return true;
    }
  }
  return false;
}

void pool_core::help_until(fork_worker& worker, help_target& target) noexcept {
  constexpr unsigned kHelpYields = 8;
  constexpr std::chrono::microseconds kFirstPark{ 20 };
  constexpr std::chrono::microseconds kLongestPark{ 1000 };
  auto& self = static_cast<worker_state&>(worker);
  worker_state* const outer = std::exchange(running_worker_, &self);  // pushes stay local
  unsigned idle_looks = 0;
  std::chrono::microseconds park = kFirstPark;
  work_item item;
  while (!target.done()) {
    if (take_next(self, item)) {  // the round's order, its fairness included
      run_item(item);
      idle_looks = 0;
      park = kFirstPark;
    } else if (++idle_looks <= kHelpYields) {
      std::this_thread::yield();
    } else {
      target.park(park);
      park = std::min(park * 2, kLongestPark);
    }
  }
  // A wait outside the worker's round (in a task from its inbox) must not leave jobs in the
  // deque once the queue is sealed: the round that would run them may never come. So it runs
  // them (and what they push) before it returns, as run_available() does.
  if (outer == nullptr && queue_.sealed()) {
    while (take_own(self, item)) {
      run_item(item);
    }
  }
  running_worker_ = outer;
}

bool pool_core::push_fork(fork_worker& worker, pool_job* job) noexcept {
  auto& self = static_cast<worker_state&>(worker);
  if (!self.deque.push(job)) {
    return false;
  }
  wake_unless_spinning();  // see "Wake-ups"
  return true;
}

pool_job* pool_core::pop_fork(fork_worker& worker) noexcept {
  return static_cast<worker_state&>(worker).deque.pop();
}

void pool_core::run_fork(fork_worker& worker, pool_job* job) noexcept {
  auto& self = static_cast<worker_state&>(worker);
  count(self.counters.from_local);
  worker_state* const outer = std::exchange(running_worker_, &self);
  job->execute(job, discarding_.load(std::memory_order_relaxed));  // relaxed: see run_one()
  running_worker_ = outer;
}

std::vector<thread_pool_worker_stats> pool_core::stats() const {
  std::vector<thread_pool_worker_stats> result(worker_count_);
  for (std::size_t i = 0; i < worker_count_; ++i) {
    const worker_counters& c = states_[i].counters;
    // relaxed: counters, each read on its own (see worker_counters).
    constexpr auto kRelaxed = std::memory_order_relaxed;
    result[i].from_local = c.from_local.load(kRelaxed);
    result[i].from_injection = c.from_injection.load(kRelaxed);
    result[i].stolen = c.stolen.load(kRelaxed);
    result[i].taken_by_thieves = c.taken_by_thieves.load(kRelaxed);
    result[i].next_task_hits = c.next_task_hits.load(kRelaxed);
    result[i].parks = c.parks.load(kRelaxed);
    result[i].spins_found_work = c.spins_found_work.load(kRelaxed);
    result[i].spins_found_nothing = c.spins_found_nothing.load(kRelaxed);
  }
  return result;
}

// ---- detail/fork_join.h ------------------------------------------------------------------

namespace {

pool_core& core_of(fork_worker& worker) noexcept {
  return *static_cast<pool_core*>(const_cast<void*>(worker.pool));
}

}  // namespace

bool push_fork(fork_worker& worker, pool_job* job) noexcept {
  return core_of(worker).push_fork(worker, job);
}

pool_job* pop_fork(fork_worker& worker) noexcept {
  return core_of(worker).pop_fork(worker);
}

void run_fork(fork_worker& worker, pool_job* job) noexcept {
  core_of(worker).run_fork(worker, job);
}

void help_until(fork_worker& worker, help_target& target) noexcept {
  core_of(worker).help_until(worker, target);
}

bool help_if_worker(help_target& target) noexcept {
  fork_worker* worker = this_thread_worker;
  if (worker == nullptr) {
    return false;
  }
  help_until(*worker, target);
  return true;
}

}  // namespace cyan::dispatch::detail
