#include "handler_thread_runtime.h"

#include <pthread.h>

#include <csignal>
#include <future>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "cyan/common/thread.h"
#include "cyan/dispatch/detail/idle_hook.h"
#include "cyan/dispatch/detail/thread_anchor.h"
#include "cyan/dispatch/detail/thread_bound_wait.h"
#include "cyan/dispatch/sleep.h"
#include "cyan/event/detail/ring.h"

namespace cyan::dispatch::detail {

handler_thread_runtime::handler_thread_runtime(handler_thread& owner, handler& user_handler,
                                               handler_thread_options options, idle_hook* hook)
    : owner_(owner),
      inbox_(owner.inbox_),
      handler_(user_handler),
      options_(std::move(options)),
      hook_(hook),
      idle_(options_.spin_before_sleep, options_.nap) {}

handler_thread_runtime::~handler_thread_runtime() {
  if (thread_.joinable()) {
    thread_.join();
  }
}

// ---- owner side ---------------------------------------------------------------------------

namespace {

// cyan's threads take no asynchronous signal: each is born with all of them blocked (the
// creating thread blocks them around the creation, and the new thread inherits the mask), so a
// signal goes to one of the program's own threads or stays pending for a signalfd
// (event::signal_set). The faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) and
// SIGABRT stay as they were: the kernel delivers those to the thread that caused them.
class signals_blocked_for_new_threads {
 public:
  signals_blocked_for_new_threads() {
    sigset_t all;
    sigfillset(&all);
    for (const int fault : { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT }) {
      sigdelset(&all, fault);
    }
    ::pthread_sigmask(SIG_BLOCK, &all, &saved_);
  }
  signals_blocked_for_new_threads(const signals_blocked_for_new_threads&) = delete;
  signals_blocked_for_new_threads& operator=(const signals_blocked_for_new_threads&) = delete;
  ~signals_blocked_for_new_threads() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

 private:
  sigset_t saved_{};
};

}  // namespace

void handler_thread_runtime::start() {
  std::promise<void> ready;
  std::future<void> set_up_done = ready.get_future();
  auto run = [this, &ready] {
    try {
      set_up();
    } catch (...) {
      tear_down();
      ready.set_exception(std::current_exception());
      return;
    }
    ready.set_value();  // `ready` is gone after this: the constructor returns
    main();
  };
  {
    const signals_blocked_for_new_threads blocked;
    thread_ = std::thread(std::move(run));
  }
  try {
    set_up_done.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

void handler_thread_runtime::join() {
  if (std::this_thread::get_id() == id_) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "cyan::dispatch::handler_thread::join called on the thread itself");
  }
  const std::lock_guard lock(join_mutex_);
  if (thread_.joinable()) {
    thread_.join();
  }
}

// ---- the thread ---------------------------------------------------------------------------

void handler_thread_runtime::set_up() {
  id_ = std::this_thread::get_id();
  // The thread's coroutines call it (or its pool) home: see detail/coro_env.h.
  this_thread_home.thread = executor_access::ref(owner_);
  this_thread_home.executor = hook_ != nullptr ? hook_->home() : this_thread_home.thread;
  thread_anchor::set_up_this_thread(this_thread_home.thread);
  if (!options_.name.empty()) {
    this_thread::set_name(options_.name);
  }
  if (options_.cpu) {
    this_thread::set_affinity(*options_.cpu);
  }
  loop_ = this_thread::get_event_loop();
  loop_->set_error_handler([this](std::exception_ptr error) {
    try {
      std::rethrow_exception(std::move(error));
    } catch (std::exception& e) {
      report(e);
    } catch (...) {
      std::runtime_error unknown("unknown exception");
      report(unknown);
    }
  });
  waker_.emplace(loop_);  // no callback: waking the loop up is the whole point
  waker_->start();
  nap_.emplace(loop_);  // no callback: ending run_once() is the whole point
  if (options_.nap > options_.nap.zero()) {
    nap_->set_timeout(options_.nap);
  }
  timer_.emplace(loop_);
  timer_->set_callback([this] {
    run_due_delayed();
    arm_timer();
  });
  inbox_.attach(*this);
  // Its own lane now: a task resuming through its queue (a fair read's yield, a wait's end)
  // never allocates, not even the first time.
  detail::open_lane_now(inbox_);
  // A loop is its first runner's (event/loop.h): claim it now, so that the thread checks hold
  // from the start, also for a thread whose tasks never wait on the loop (io_uring sockets).
  loop_->run_nowait();
}

void handler_thread_runtime::tear_down() noexcept {
  thread_anchor::run_handed_over();  // closes from elsewhere, while the ring is whole
  end_this_thread_waits();           // waits of tasks from elsewhere (see thread_bound_wait.h)
  reset_this_thread_wait_wheel();    // ends the timed waits still pending (see timed_wait.h)
  event::detail::ring::reset_this_thread();  // after the tasks: it waits for what is in flight
  timer_.reset();
  nap_.reset();
  waker_.reset();
  if (loop_) {
    loop_->set_error_handler(nullptr);  // it captured `this`
  }
  thread_anchor::end_this_thread();  // last: what is handed over from now on runs elsewhere
}

void handler_thread_runtime::main() noexcept {
  call_handler(&handler_access::initialize);
  while (!inbox_.ready_to_finish()) {  // see "Stop" below
    try {
      run();
    } catch (std::exception& error) {  // from the loop or the timer: report, keep serving
      report(error);
    }
  }
  finish();
  call_handler(&handler_access::finalize);
  tear_down();
  inbox_.mark_finished();
}

// ---- the round ---------------------------------------------------------------------------

// The round, as run() reads it (it loops until stop() and the hand-overs it waits for, see
// "Stop" below):
//   1. drain:   the sources (drain_sources(), "The sources" below), at most kBatch from each;
//   2. decide:  with the idle policy (idle_policy.h):
//               - when something ran, every kLoopPollInterval of busy rounds one non-blocking
//                 turn of the loop for its timers and io (idle_policy::worked, poll_loop);
//               - otherwise, look a little longer (idle_policy::keep_looking): when the loop (io,
//                 a timer) ended the last sleep, the next event is most likely the loop's again:
//                 non-blocking turns of the loop while they find events, without announcing a
//                 sleep or reading the clock (the first one after a wake-up only while such turns
//                 keep finding something); else a spin over the sources for up to the adaptive
//                 spin budget, yielding after a while;
//   3. sleep:   when that found nothing (sleep()): announce the sleep to producers (a nap
//               without the process-wide fence, bounded by options_.nap; a deep sleep with it,
//               unbounded, after a nap that ended with nothing to do or while the fence is
//               cheap), then block in the loop until a post, a timer or io wakes it.
void handler_thread_runtime::run() {
  while (!inbox_.ready_to_finish()) {
    const std::size_t taken = drain_sources();
    if (taken != 0) {
      if (idle_.worked(taken)) {
        poll_loop();
      }
    } else if (!idle_.keep_looking([this] { return poll_loop(); },
                                   [this] { return sources_have_work(); })) {
      sleep();
    }
  }
}

// The sources. Where a round finds work, in the order it looks:
//   - the inbox:   the shared queue, then each producer's lane (inbox::drain);
//   - the ring:    the thread's io_uring, once a socket or file set it up (event/detail/ring.h):
//                  queued entries submitted and completions run in one system call, made only
//                  when its shared memory says there is something; asleep, the thread is woken
//                  by the ring's eventfd, which the loop watches;
//   - elsewhere:   only when the inbox was empty: the idle hook's work, a pool worker's claim
//                  from the pool's shared queue (idle_hook::run_elsewhere);
//   - the loop:    io watchers and timers (delayed work among them, see "Delayed work" below): a
//                  system call per turn, so not drained every round but when the idle policy
//                  says (a busy thread's periodic turn, the turns after a wake-up by the loop)
//                  and in every sleep.
// A static list, not a registry of pollers: there are few sources, and each is drained, probed
// and slept on in its own way. A new one is one more entry in drain_sources() and in
// others_have_work() (what the spin and the sleep check probe), and, if the thread must arm
// something before it blocks, a line in sleep().
std::size_t handler_thread_runtime::drain_sources() {
  std::size_t taken = inbox_.drain(kBatch);
  if (event::detail::ring* ring = event::detail::ring::this_thread_if_set_up();
      ring != nullptr && ring->has_work()) {
    taken += ring->drain();
  }
  if (taken == 0 && hook_ != nullptr) {
    taken = hook_->run_elsewhere(owner_);
  }
  return taken;
}

// The spin's probe: cheap, relaxed looks.
bool handler_thread_runtime::sources_have_work() noexcept {
  return inbox_.looks_busy() || others_have_work(this);
}

// The sources beyond the inbox: what the sleep check asks after the announcement (see
// inbox::prepare_sleep and "No lost wake-up" in idle_hook.h).
bool handler_thread_runtime::others_have_work(void* self) noexcept {
  auto* runtime = static_cast<handler_thread_runtime*>(self);
  const event::detail::ring* ring = event::detail::ring::this_thread_if_set_up();
  return (ring != nullptr && ring->has_work()) ||
         (runtime->hook_ != nullptr && runtime->hook_->has_work(runtime->owner_));
}

// One non-blocking turn of the loop; whether it ran callbacks. The loop's time is a clock
// reading from a round that ran callbacks (its start, or a timer start in it).
bool handler_thread_runtime::poll_loop() {
  const bool ran = loop_->run_nowait();
  idle_.loop_turned(ran ? loop_->now() : clock::now());
  return ran;
}

// Step 3 of the round: try to enter the sleep (the idle policy's plan, the inbox's
// announcement and check), block in the loop, leave the sleep (what the policy learns).
void handler_thread_runtime::sleep() {
  const idle_policy::sleep_plan plan = idle_.enter_sleep();
  clock::duration fence_took{};
  switch (inbox_.prepare_sleep(&others_have_work, this, plan.fence,
                               plan.time_fence ? &fence_took : nullptr)) {
    case inbox::sleep_check::work:
      idle_.sleep_refused();
      return;
    case inbox::sleep_check::producer_busy:
      // Its thread may be preempted on this CPU: spinning would only keep it from finishing.
      std::this_thread::yield();
      return;
    case inbox::sleep_check::may_sleep:
      break;
  }
  if (plan.time_fence) {
    if (idle_.fence_timed(fence_took)) {
      inbox_.count_dear_fence();
    }
  }
  const clock::time_point fell_asleep = clock::now();
  if (plan.nap()) {
    nap_->start();
  }
  inbox_.count_sleep(plan.nap());
  loop_->run_once();
  inbox_.woke();
  const bool nap_expired = plan.nap() && !nap_->is_active();
  nap_->stop();
  // Whatever ended the sleep (a post's wake-up, io, a timer, the nap) ran a callback, and the
  // loop read the clock for it; a round without one leaves the loop's time older than
  // fell_asleep.
  clock::time_point woke_at = loop_->now();
  if (woke_at < fell_asleep) {
    woke_at = clock::now();
  }
  const bool post_waiting = inbox_.looks_busy();
  // A pool worker's wake-up for the pool's queue is a post's, not the loop's.
  const bool by_loop = !nap_expired && !post_waiting && !others_have_work(this);
  idle_.left_sleep({ fell_asleep, woke_at, nap_expired, post_waiting, by_loop });
}

// ---- delayed work -------------------------------------------------------------------------

// Delayed work (post(f, delay), send_delayed(), and so the pool's delayed tasks, which wait on
// its timer thread) is held in due order in delayed_, behind one loop timer armed for the
// earliest. Not on the timer wheel that sleep_for() and socket timeouts use (event/timer_wheel.h,
// 1 ms ticks): the wheel buys O(1) post and cancel for very many timeouts that are mostly
// cancelled, but runs an entry on the first tick boundary after its due time, and its teardown
// destroys entries in no particular order. A delayed post is never cancelled one by one, runs
// at its due time as the loop's timer sees it (not up to a tick later), and a drain stop needs
// what is due in due order and the rest cancelled (finish()); moving it to the wheel would
// change when delayed work runs.

void handler_thread_runtime::schedule(clock::time_point due, inbox_task task) {
  if (finishing_) {  // stop(): run what is due, cancel the rest (see stop_mode::drain)
    if (due <= clock::now() && !inbox_.discarding()) {
      inbox_.run_task(task);
    } else {
      inbox_.cancel_task(task);
    }
    return;
  }
  delayed_.emplace(due, std::move(task));
  if (due < armed_for_) {
    arm_timer();
  }
}

void handler_thread_runtime::arm_timer() {
  timer_->stop();
  armed_for_ = clock::time_point::max();
  if (delayed_.empty() || delayed_.begin()->first == clock::time_point::max()) {
    return;  // nothing, or only work that is never due
  }
  armed_for_ = delayed_.begin()->first;
  const auto wait = std::max(armed_for_ - clock::now(), clock::duration::zero());
  timer_->set_timeout(std::chrono::duration_cast<event::timer::duration>(wait));
  timer_->start();
}

void handler_thread_runtime::run_due_delayed() noexcept {
  const clock::time_point now = clock::now();
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    auto due = delayed_.extract(delayed_.begin());
    if (inbox_.discarding()) {
      inbox_.cancel_task(due.mapped());
    } else {
      inbox_.run_task(due.mapped());
    }
  }
}

void handler_thread_runtime::cancel_delayed() noexcept {
  for (auto& [due, task] : delayed_) {
    inbox_.cancel_task(task);
  }
  delayed_.clear();
  timer_->stop();
}

// ---- stop ---------------------------------------------------------------------------------

// Stop: the phases and the argument are in detail/outstanding_work.h ("Stop"); the thread's
// steps, in order:
//   1. handler_thread::stop() [any thread]: the account's stopping(), then the inbox refuses
//      posts (kStopped) and wakes the thread.
//   2. serve: the thread goes on with its rounds (tasks, timers, spinning, sleeping) while the
//      owner is expecting_hand_overs() (its outstanding_work is not drained: a token post
//      between its check and the end of its submit, a token still holding a task for this
//      thread, a spawned task alive); whoever makes one of its counts zero calls inbox::
//      notify() (handler_thread::on_work_drop), so the thread sleeps while it waits (see "Stop"
//      in inbox.h).
//   3. finish(): the inbox closes (kClosed), waits out in-flight posts and runs (drain) or
//      cancels (discard) everything queued; delayed work that is due runs (drain), the rest is
//      cancelled.
//   4. on_finalize(), tear_down() (which first ends the socket waits of tasks spawned elsewhere
//      that are still pending on this loop, see thread_bound_wait.h), mark_finished() (main()).

void handler_thread_runtime::finish() noexcept {
  finishing_ = true;
  inbox_.finish();
  if (!inbox_.discarding()) {
    run_due_delayed();
  }
  cancel_delayed();
}

void handler_thread_runtime::call_handler(void (*callback)(handler&)) noexcept {
  try {
    callback(handler_);
  } catch (std::exception& error) {
    report(error);
  } catch (...) {
    std::runtime_error unknown("unknown exception");
    report(unknown);
  }
}

}  // namespace cyan::dispatch::detail
