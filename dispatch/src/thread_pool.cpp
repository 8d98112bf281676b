#include "cyan/dispatch/thread_pool.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "pool_core.h"

// Sleep. A worker that finds the queue empty spins for kSpin, then marks itself idle (flag,
// then sleepers_ += 1, both seq_cst) and returns to its handler_thread, which announces its
// sleep and asks has_work() (the queue, seq_cst) once more before blocking. A producer pushes
// (a seq_cst claim) and then loads sleepers_ (seq_cst); if it is non-zero it claims one idle
// flag and calls wake_if_sleeping() on that worker. These four accesses are totally ordered:
// either the producer's load sees the increment (and the flag, set before it), or the worker's
// later has_work() sees the pushed task. A worker woken by another producer re-reads the queue
// after that producer's wake, and goes back to sleep only through a new increment, so the
// argument repeats. Busy workers are not marked, so a post then costs no wake-up at all.
//
// Stop. stop() seals the queue: a user post's claim either precedes the seal (the task is
// queued and will run, or be cancelled by discard) or is refused, and the post throws. Token
// posts are counted in serial_posting_ from before their check of the seal to the end of their
// submit, and the tasks they park behind another executor's task are counted by tracker_. The
// pool is drained when, read in this order, serial_posting_ == 0, tracker_ is released and the
// queue is empty; then close_if_empty() closes it (atomically with the emptiness check, so a
// token hand-over, the one push allowed after the seal, is either queued first or refused) and
// the workers are told to stop, once. Whoever may change one of those conditions calls
// try_finish(): stop() itself, a worker that found the queue empty, a token post as it leaves,
// and the tracker when it is released (a hand-over releases it only after its push).

namespace cyan::dispatch {
namespace detail {
namespace {

// Tasks a worker runs from the shared queue before it looks at its own inbox (and its loop's
// timers) again.
constexpr std::size_t kBatch = 64;
// Tasks a worker claims from the queue at once: fewer claims (CASes on the shared head) per
// task, while a long queue lasts; the queue itself hands out less when little is left.
constexpr std::size_t kClaim = 8;
// How long an idle worker keeps looking at the queue before it may sleep: long enough to
// bridge the gaps of a producer posting a stream, short enough to give the CPU back soon.
constexpr std::chrono::microseconds kSpin{ 50 };

void print_error(std::exception_ptr error) noexcept {
  try {
    std::rethrow_exception(std::move(error));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cyan::dispatch::thread_pool: a task threw: %s\n", e.what());
  } catch (...) {
    std::fputs("cyan::dispatch::thread_pool: a task threw an unknown exception\n", stderr);
  }
}

std::size_t at_least_one(std::size_t threads) {
  if (threads == 0) {
    throw std::invalid_argument("cyan::dispatch::thread_pool: needs at least one thread");
  }
  return threads;
}

}  // namespace

pool_core::pool_core(std::size_t threads, thread_pool_options opts)
    : on_error_(std::move(opts.on_error)), states_(new worker_state[at_least_one(threads)]) {
  workers_.reserve(threads);
  try {
    for (std::size_t i = 0; i < threads; ++i) {
      states_[i].core = this;
      handler_thread_options worker_options;
      worker_options.name = opts.name + "-" + std::to_string(i);
      worker_options.spin_before_sleep = std::chrono::nanoseconds::zero();  // run_batch spins
      worker_options.idle_hook = &states_[i];
      workers_.push_back(std::make_unique<handler_thread>(std::move(worker_options)));
    }
  } catch (...) {
    stop(stop_mode::drain);
    join();
    throw;
  }
}

pool_core::~pool_core() {
  stop(stop_mode::drain);
  join();
}

// ---- posting ------------------------------------------------------------------------------

void pool_core::post(task&& t) {
  if (!queue_.try_push(std::move(t))) {
    throw executor_stopped("cyan::dispatch::thread_pool: post after stop()");
  }
  wake_one();
}

void pool_core::post_after(task&& t, thread_pool::clock::duration delay) {
  if (queue_.sealed()) {
    throw executor_stopped("cyan::dispatch::thread_pool: post after stop()");
  }
  // The worker whose timer fires runs the task; its handler_thread cancels it if the pool
  // stops first. Spread over the workers round-robin.
  // relaxed: only picks a worker.
  handler_thread& worker =
      *workers_[next_delayed_.fetch_add(1, std::memory_order_relaxed) % workers_.size()];
  worker.post([this, t = std::move(t)]() mutable { run_one(t); }, delay);
}

void pool_core::post_serial(const serial_token& token, task&& t) {
  serial_posting_.value.fetch_add(1, std::memory_order_seq_cst);  // see "Stop"
  if (queue_.sealed()) {
    leave_serial_post();
    throw executor_stopped("cyan::dispatch::thread_pool: post after stop()");
  }
  try {
    serial_access::submit(
        token, std::move(t), [this](task step) { post_handed_over(std::move(step)); }, &tracker_);
  } catch (...) {
    leave_serial_post();
    throw;
  }
  leave_serial_post();
}

// A token's step handed over by whoever finished the token's previous task. Accepted while
// draining (it was posted before stop()); refused once the queue is closed, which destroys it
// unrun (with this function's caller's parameter): the token task is cancelled and the token
// moves on.
void pool_core::post_handed_over(task&& step) {
  if (queue_.try_push(std::move(step), task_queue::push_policy::unless_closed)) {
    wake_one();
  }
}

void pool_core::leave_serial_post() noexcept {
  if (serial_posting_.value.fetch_sub(1, std::memory_order_seq_cst) == 1) {
    try_finish();
  }
}

// ---- workers ------------------------------------------------------------------------------

std::size_t pool_core::worker_state::run_elsewhere(handler_thread&) noexcept {
  return core->run_batch(*this);
}

bool pool_core::worker_state::has_work(handler_thread&) noexcept {
  return !core->queue_.empty();
}

std::size_t pool_core::run_batch(worker_state& self) noexcept {
  reclaim(self);
  task claimed[kClaim];
  std::size_t ran = 0;
  do {
    while (ran < kBatch) {
      const std::size_t count = queue_.try_pop_many(claimed, kClaim);
      if (count == 0) {
        break;
      }
      for (std::size_t i = 0; i < count; ++i) {
        run_one(claimed[i]);
      }
      ran += count;
    }
  } while (ran == 0 && spin_for_work());
  if (ran == 0) {
    if (queue_.sealed()) {
      try_finish();
    }
    mark_idle(self);
  }
  return ran;
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

bool pool_core::spin_for_work() const noexcept {
  // The clock is read every kTurnsPerCheck turns: reading it costs more than a look at the
  // queue. Yields now and then, for the producer may share this worker's core.
  constexpr unsigned kTurnsPerCheck = 32;
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (unsigned turn = 1;; ++turn) {
    if (!queue_.empty()) {
      return true;
    }
    if (turn % kTurnsPerCheck != 0) {
      cpu_relax();
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
      self.idle.exchange(false, std::memory_order_acq_rel)) {
    sleepers_.value.fetch_sub(1, std::memory_order_relaxed);  // a count only: see "Sleep"
  }
}

void pool_core::wake_one() noexcept {
  if (sleepers_.value.load(std::memory_order_seq_cst) == 0) {  // see "Sleep"
    return;
  }
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    worker_state& state = states_[i];
    // acq_rel: pairs with the seq_cst store in mark_idle(); one claimer per idle period.
    if (state.idle.load(std::memory_order_relaxed) &&
        state.idle.exchange(false, std::memory_order_acq_rel)) {
      sleepers_.value.fetch_sub(1, std::memory_order_relaxed);  // a count only
      wake_if_sleeping(*workers_[i]);
      return;
    }
  }
}

// ---- stop ---------------------------------------------------------------------------------

void pool_core::stop(stop_mode mode) noexcept {
  if (mode == stop_mode::discard) {
    discarding_.store(true, std::memory_order_seq_cst);
  }
  queue_.seal();
  tracker_.stopping();
  if (finished_.load(std::memory_order_seq_cst)) {
    if (mode == stop_mode::discard) {  // the workers may still hold delayed tasks
      for (auto& worker : workers_) {
        worker->stop(stop_mode::discard);
      }
    }
    return;
  }
  try_finish();
}

void pool_core::try_finish() noexcept {
  if (!queue_.sealed() || finished_.load(std::memory_order_seq_cst)) {
    return;
  }
  // In this order (see "Stop").
  if (serial_posting_.value.load(std::memory_order_seq_cst) != 0 || !tracker_.released() ||
      !queue_.close_if_empty()) {
    return;
  }
  if (finished_.exchange(true, std::memory_order_seq_cst)) {
    return;
  }
  const stop_mode mode =
      discarding_.load(std::memory_order_seq_cst) ? stop_mode::discard : stop_mode::drain;
  for (auto& worker : workers_) {
    worker->stop(mode);
  }
}

void pool_core::on_tracker_released(void* self) noexcept {
  static_cast<pool_core*>(self)->try_finish();
}

void pool_core::join() {
  if (is_current()) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "cyan::dispatch::thread_pool::join on one of its workers");
  }
  for (auto& worker : workers_) {
    worker->join();
  }
}

bool pool_core::is_current() const noexcept {
  for (const auto& worker : workers_) {
    if (worker->is_current()) {
      return true;
    }
  }
  return false;
}

// ---- errors -------------------------------------------------------------------------------

void pool_core::set_error_callback(std::function<void(std::exception_ptr)> on_error) {
  const std::lock_guard lock(error_mutex_);
  on_error_ = std::move(on_error);
}

void pool_core::report(std::exception_ptr error) noexcept {
  std::function<void(std::exception_ptr)> callback;
  try {
    const std::lock_guard lock(error_mutex_);
    callback = on_error_;
  } catch (...) {  // copying the callback failed: fall back to stderr
  }
  if (!callback) {
    print_error(std::move(error));
    return;
  }
  try {
    callback(std::move(error));
  } catch (...) {
    std::fputs("cyan::dispatch::thread_pool: the error callback threw\n", stderr);
  }
}

}  // namespace detail

// ---- thread_pool --------------------------------------------------------------------------

thread_pool::thread_pool(std::size_t threads, options opts)
    : core_(std::make_unique<detail::pool_core>(threads, std::move(opts))) {}

thread_pool::~thread_pool() {
  if (core_->is_current()) {
    std::fputs(
        "cyan::dispatch::thread_pool: destroyed on one of its workers, which cannot "
        "join themselves\n",
        stderr);
    std::abort();
  }
}

void thread_pool::post_task(unique_function<void()>&& task) {
  core_->post(std::move(task));
}

void thread_pool::post_task_after(unique_function<void()>&& task, clock::duration delay) {
  core_->post_after(std::move(task), delay);
}

void thread_pool::post_serial(const serial_token& token, unique_function<void()>&& task) {
  core_->post_serial(token, std::move(task));
}

void thread_pool::stop(stop_mode mode) noexcept {
  core_->stop(mode);
}

void thread_pool::join() {
  core_->join();
}

std::size_t thread_pool::size() const noexcept {
  return core_->size();
}

bool thread_pool::is_current() const noexcept {
  return core_->is_current();
}

void thread_pool::set_error_callback(std::function<void(std::exception_ptr)> on_error) {
  core_->set_error_callback(std::move(on_error));
}

std::size_t thread_pool::default_size() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

}  // namespace cyan::dispatch
