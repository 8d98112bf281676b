#pragma once

// The machinery behind thread_pool: the shared task queue, the workers (handler_threads whose
// idle_hook takes tasks from that queue), the timer thread that holds delayed tasks until they
// are due, the sleep/wake handshake and the stop protocol. By phase:
//   pool_core.cpp          set-up (the workers, the timer thread), tear-down, the error path;
//   pool_post.cpp          posting: plain, delayed, token posts, hand-overs;
//   pool_worker_round.cpp  the worker round: claim, steal, spin, go idle; waking a worker;
//   pool_local.cpp         the local deques: local posts, the take order, stealing, helping
//                          waits, the fork-join entry points of detail/fork_join.h, stats;
//   pool_stop.cpp          stop (the pool's steps of detail/outstanding_work.h's protocol), join;
//   thread_pool.cpp        the public facade.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/dispatch/detail/destroy_task.h"
#include "cyan/dispatch/detail/fork_join.h"
#include "cyan/dispatch/detail/frame_allocator.h"
#include "cyan/dispatch/detail/idle_hook.h"
#include "cyan/dispatch/detail/outstanding_work.h"
#include "cyan/dispatch/detail/serial_state.h"
#include "cyan/dispatch/detail/spin_governor.h"
#include "cyan/dispatch/detail/task_queue.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/stop_mode.h"
#include "cyan/dispatch/thread_pool.h"
#include "work_deque.h"

namespace cyan::dispatch::detail {

class pool_core : noncopyable {
 public:
  using task = unique_function<void()>;

  static const executor_vtable vtable;
  [[nodiscard]] executor_ref ref() noexcept { return executor_ref{ this, &vtable }; }
  [[nodiscard]] spawn_registry& spawned() noexcept { return work_.spawned(); }

  pool_core(std::size_t threads, thread_pool_options opts);
  ~pool_core();

  void post(task&& t);                                            // [any thread]
  void post_after(task&& t, thread_pool::clock::duration delay);  // [any thread]
  void post_serial(const serial_token& token, task&& t);          // [any thread]
  void stop(stop_mode mode) noexcept;                             // [any thread]
  void join();                                                    // [not a worker]
  [[nodiscard]] std::size_t size() const noexcept { return workers_.size(); }
  [[nodiscard]] bool is_current() const noexcept;
  void set_error_callback(std::function<void(std::exception_ptr)> on_error);
  void report_error(std::exception_ptr error) noexcept { report(std::move(error)); }
  [[nodiscard]] std::vector<thread_pool_worker_stats> stats() const;

  // The fork-join entry points (detail/fork_join.h), on the worker's own thread.
  [[nodiscard]] bool push_fork(fork_worker& worker, pool_job* job) noexcept;
  [[nodiscard]] pool_job* pop_fork(fork_worker& worker) noexcept;
  void run_fork(fork_worker& worker, pool_job* job) noexcept;
  void help_until(fork_worker& worker, help_target& target) noexcept;

 private:
  // Most tasks one claim takes from the shared queue (see "Batches" in pool_worker_round.cpp).
  static constexpr std::size_t kMaxClaim = 16;
  // worker_state::next_mark's two values that mark no task (see "The next task").
  static constexpr std::uint64_t kNoNext = 0;
  static constexpr std::uint64_t kTakingNext = 1;

  // A worker's counters (thread_pool_worker_stats): written by the worker alone (a relaxed load
  // and store, no RMW), read by stats() on any thread. taken_by_thieves is apart: thieves add to
  // it, with a relaxed RMW, on its own line.
  struct alignas(cache_line_size) worker_counters {
    std::atomic<std::uint64_t> from_local{ 0 };
    std::atomic<std::uint64_t> from_injection{ 0 };
    std::atomic<std::uint64_t> stolen{ 0 };
    std::atomic<std::uint64_t> next_task_hits{ 0 };
    std::atomic<std::uint64_t> parks{ 0 };
    std::atomic<std::uint64_t> spins_found_work{ 0 };
    std::atomic<std::uint64_t> spins_found_nothing{ 0 };
    alignas(cache_line_size) std::atomic<std::uint64_t> taken_by_thieves{ 0 };
  };

  // A task posted from a pool task, boxed for the local deque (which holds pointers: a thief
  // must read a slot it may lose, which a non-trivial task could not survive).
  struct boxed_task final : pool_job, frame_allocated {
    boxed_task(pool_core& owner, task&& t) noexcept
        : pool_job{ &execute_boxed }, core(&owner), work(std::move(t)) {}
    pool_core* core;
    task work;
  };
  static void execute_boxed(pool_job* job, bool discard) noexcept;

  // What one take found: a task from the shared queue, a batch or a next-task slot, or a job
  // from a deque.
  struct work_item {
    task work;
    pool_job* job = nullptr;
  };

  // One per worker: its hook into the shared queue and its idle flag.
  struct alignas(cache_line_size) worker_state final : idle_hook, fork_worker {
    std::size_t run_elsewhere(handler_thread& worker) noexcept override;
    bool has_work(handler_thread& worker) noexcept override;
    executor_ref home() noexcept override;

    // The tasks of a batch claim beyond the one the worker runs first (see "Batches" in
    // pool_worker_round.cpp): [begin, end) of local. The worker takes from the front, idle workers
    // steal from the back; both under local_mutex.
    std::mutex local_mutex;
    task local[kMaxClaim];
    std::size_t begin = 0;  // guarded by local_mutex
    std::size_t end = 0;    // guarded by local_mutex
    // end - begin, written under local_mutex; read without it by whoever looks for work.
    std::atomic<std::size_t> local_count{ 0 };
    // The worker's next task (see "The next task" in pool_worker_round.cpp) and its mark, on
    // lines of their own: the worker writes them for every hand-over, and idle workers read
    // the mark while they look for work.
    alignas(cache_line_size) task next;
    // Who owns `next`: kNoNext (empty, the worker may fill it), an even number (a task, the
    // number of the put that placed it, so that a new task is told from one that waits), or
    // kTakingNext (an idle worker is moving it out).
    std::atomic<std::uint64_t> next_mark{ 0 };
    std::uint64_t puts = 0;  // the worker's own: puts into `next` so far, times 2
    // The worker's own, as a thief: the other worker whose next task it watches, that task's
    // mark (0: none), since when, and whether it waited past the grace (it may be taken).
    alignas(cache_line_size) std::size_t watched = 0;
    std::uint64_t watched_mark = 0;
    std::chrono::steady_clock::time_point watched_since{};
    bool watched_stuck = false;

    pool_core* core = nullptr;
    // Set by the worker when it found no work and may sleep; cleared by whoever claims it:
    // the worker itself when it looks for work again, or a producer that then wakes it. A
    // worker whose flag was cleared by a producer does not sleep before it looked again.
    std::atomic<bool> idle{ false };
    // Written and read only by the worker (see task_queue::tail_hint).
    task_queue::tail_hint tail;
    // The worker's own: how long it spins before it sleeps (see "Spinning" in
    // pool_worker_round.cpp).
    spin_governor spin;
    // The worker's own: local takes since it last looked at the shared queue first (see
    // "Fairness" in pool_local.cpp), and its thief's random state.
    std::uint32_t local_streak = 0;
    std::uint64_t random = 0;

    // Its local run queue (see work_deque.h and pool_local.cpp).
    work_deque deque;
    worker_counters counters;
  };

  // A delayed task on the timer thread; once due it goes to the shared queue. Counted in work_
  // from post_after() until it is queued or destroyed unrun.
  class delayed_task {
   public:
    delayed_task(pool_core& core, task&& t) noexcept : core_(&core), task_(std::move(t)) {}
    delayed_task(delayed_task&& other) noexcept
        : core_(std::exchange(other.core_, nullptr)), task_(std::move(other.task_)) {}
    delayed_task& operator=(delayed_task&&) = delete;
    ~delayed_task();
    void operator()();

   private:
    pool_core* core_;
    task task_;
  };

  std::size_t run_batch(worker_state& self) noexcept;
  std::size_t run_available(worker_state& self) noexcept;
  [[nodiscard]] bool take_next(worker_state& self, work_item& out) noexcept;
  [[nodiscard]] static bool take_local(worker_state& state, task& out, bool from_back) noexcept;
  [[nodiscard]] bool claim(worker_state& self, task& out) noexcept;
  [[nodiscard]] bool steal(worker_state& self, task& out) noexcept;
  [[nodiscard]] bool any_local() const noexcept;
  void put_next(worker_state& self, task&& job) noexcept;
  [[nodiscard]] static bool take_own_next(worker_state& self, task& out) noexcept;
  static void wait_while_taken(const worker_state& self) noexcept;
  void requeue_next(worker_state& self) noexcept;
  [[nodiscard]] bool steal_stuck_next(worker_state& self, task& out) noexcept;
  [[nodiscard]] bool next_waits_too_long(worker_state& self,
                                         std::chrono::steady_clock::time_point now) noexcept;
  [[nodiscard]] bool next_task_stuck(worker_state& self) noexcept;
  [[nodiscard]] bool any_next() const noexcept;
  void run_one(task& t) noexcept;
  // pool_local.cpp
  [[nodiscard]] worker_state* local_worker() noexcept;
  [[nodiscard]] bool push_local(worker_state& self, task&& t);
  [[nodiscard]] bool take_own(worker_state& self, work_item& out) noexcept;
  [[nodiscard]] bool steal_job(worker_state& self, work_item& out) noexcept;
  [[nodiscard]] bool any_deque() const noexcept;
  void run_item(work_item& item) noexcept;
  static void count(std::atomic<std::uint64_t>& counter) noexcept {
    // relaxed, and no RMW: the worker alone writes its counters (see worker_counters).
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  [[nodiscard]] bool spin_for_work(worker_state& self) noexcept;
  [[nodiscard]] bool poll_queue(worker_state& self) noexcept;
  void mark_idle(worker_state& self) noexcept;
  void reclaim(worker_state& self) noexcept;
  void wake_unless_spinning() noexcept;
  void post_handed_over(task&& work);
  static void resume_later(void* self, task&& job) noexcept;
  static void resume_next(void* self, task&& job) noexcept;
  // The worker running run_available() on this thread, if any: resume_next() puts into its
  // slot (see "The next task" in pool_worker_round.cpp).
  static thread_local worker_state* running_worker_;
  // The worker this thread is (of whichever pool), set at its first round; null elsewhere.
  static worker_state* this_worker() noexcept {
    return static_cast<worker_state*>(this_thread_worker);
  }
  void try_finish() noexcept;
  // work_'s on_drop: a count the drain waits for dropped to zero after the stop.
  static void on_work_drop(void* self) noexcept;
  // The token tracker's error sink: report() may run on any thread.
  static bool on_token_error(void* self, std::exception_ptr error) noexcept {
    static_cast<pool_core*>(self)->report(std::move(error));
    return true;
  }
  void report(std::exception_ptr error) noexcept;

  // Sealed by stop(), closed when the workers are told to stop (see "Stop" in pool_stop.cpp).
  task_queue queue_;
  // Workers marked idle (see "Sleep" in pool_worker_round.cpp).
  cache_padded<std::atomic<std::uint32_t>> sleepers_;
  // Workers polling the empty queue (see "Spinning" in pool_worker_round.cpp), at most
  // max_spinners_.
  cache_padded<std::atomic<std::uint32_t>> spinners_;
  std::uint32_t max_spinners_ = 1;
  // The number of workers, set before any starts: workers read this, not workers_.size(),
  // because the first ones run while the constructor is still filling workers_.
  const std::size_t worker_count_;
  std::atomic<bool> discarding_{ false };
  std::atomic<bool> finished_{ false };  // the workers were told to stop

  std::mutex error_mutex_;
  std::function<void(std::exception_ptr)> on_error_;  // guarded by error_mutex_

  // The hooks outlive the workers that call them.
  std::unique_ptr<worker_state[]> states_;
  std::vector<std::unique_ptr<handler_thread>> workers_;
  // Holds delayed tasks until they are due. Its own thread, because a worker's timers wait
  // while the worker runs a long task.
  std::unique_ptr<handler_thread> timer_thread_;
  // Last: destroyed first, it waits until no token still holds a task for this pool and no
  // on_drop call (which runs try_finish()) runs. Delayed tasks, token posts, token tasks and
  // co_spawn tasks are counted here (see "Stop" in detail/outstanding_work.h).
  outstanding_work work_{ &on_work_drop, this, &on_token_error };
};

}  // namespace cyan::dispatch::detail
