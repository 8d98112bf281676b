#include "handler_thread_runtime.h"

#include <future>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "cyan/common/cache_line.h"
#include "cyan/common/thread.h"
#include "cyan/dispatch/detail/idle_hook.h"
#include "cyan/dispatch/detail/thread_bound_wait.h"
#include "cyan/dispatch/sleep.h"

namespace cyan::dispatch::detail {

handler_thread_runtime::handler_thread_runtime(handler_thread& owner, handler& user_handler,
                                               handler_thread_options options, idle_hook* hook)
    : owner_(owner),
      inbox_(owner.inbox_),
      handler_(user_handler),
      options_(std::move(options)),
      hook_(hook),
      spin_budget_(
          std::max<clock::duration>(std::chrono::ceil<clock::duration>(options_.spin_before_sleep),
                                    clock::duration::zero())) {}

handler_thread_runtime::~handler_thread_runtime() {
  if (thread_.joinable()) {
    thread_.join();
  }
}

// ---- owner side ---------------------------------------------------------------------------

void handler_thread_runtime::start() {
  std::promise<void> ready;
  std::future<void> set_up_done = ready.get_future();
  thread_ = std::thread([this, &ready] {
    try {
      set_up();
    } catch (...) {
      tear_down();
      ready.set_exception(std::current_exception());
      return;
    }
    ready.set_value();  // `ready` is gone after this: the constructor returns
    main();
  });
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
}

void handler_thread_runtime::tear_down() noexcept {
  end_this_thread_waits();          // waits of tasks from elsewhere (see thread_bound_wait.h)
  reset_this_thread_sleep_wheel();  // destroys sleepers' entries unrun (see sleep.cpp)
  timer_.reset();
  nap_.reset();
  waker_.reset();
  if (loop_) {
    loop_->set_error_handler(nullptr);  // it captured `this`
  }
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

// A round of the thread, in order (run() loops over them until stop() and the hand-overs it
// waits for, see "Stop" below):
//   1. drain:        the inbox: the shared queue, then each producer's lane, at most kBatch
//                    from each (inbox::drain);
//   2. elsewhere:    only when the inbox was empty: the idle hook's work, a pool's shared queue
//                    (idle_hook::run_elsewhere);
//   3. after_round:  when something ran: every kLoopPollInterval of busy rounds, one
//                    non-blocking turn of the loop for its timers and io (poll_loop);
//   otherwise, with nothing to do:
//   4. poll:         when the loop (io, a timer) ended the last sleep, the next event is most
//                    likely the loop's again: one non-blocking turn of the loop instead of a spin
//                    (poll_after_wake); while such turns find events, the thread goes on polling
//                    — as a busy raw libev loop does — without announcing a sleep or reading the
//                    clock; the first that finds nothing leads to a sleep (5 or 6). While the
//                    first turns after wake-ups keep finding nothing (request/response at light
//                    load), wake-ups skip them and go to the sleep, retrying now and then
//                    (poll_after_wake, common/detail/adaptive_attempts.h);
//   4'. spin:        otherwise, look for work for up to the adaptive spin budget, yielding after
//                    kSpinBeforeYield (spin, yield_and_learn);
//   5. nap:          announce the sleep without the process-wide fence and block in the loop for
//                    at most options_.nap (sleep with a light may_sleep);
//   6. deep sleep:   after a nap that ended with nothing to do: announce with the fence and
//                    block in the loop until a post, a timer or io wakes it (sleep with a heavy
//                    may_sleep).
void handler_thread_runtime::run() {
  while (!inbox_.ready_to_finish()) {
    std::size_t taken = inbox_.drain(kBatch);
    if (taken == 0 && hook_ != nullptr) {
      taken = hook_->run_elsewhere(owner_);
    }
    if (taken != 0) {
      nap_expired_ = false;
      loop_woke_ = false;
      after_round(taken);
    } else if (loop_woke_) {
      if (!poll_after_wake()) {
        sleep();
      }
    } else if (!spin()) {
      sleep();
    }
  }
}

// A busy thread still lets its loop run (timers, io) every kLoopPollInterval; the clock is
// read only every few rounds because reading it costs more than a tiny task.
void handler_thread_runtime::after_round(std::size_t taken) {
  tasks_since_clock_ += taken;
  if (++rounds_since_clock_ < kRoundsPerClockCheck && tasks_since_clock_ < kTasksPerClockCheck) {
    return;
  }
  rounds_since_clock_ = 0;
  tasks_since_clock_ = 0;
  if (clock::now() - last_poll_ >= kLoopPollInterval) {
    poll_loop();
  }
}

// Step 4: the first turn after a wake-up by the loop only when wake_poll_ says it is worth it
// (false: sleep), the turns after it while they find events. On a request/response socket at
// light load the first turn finds nothing (the reply went out, the next request is a round
// trip away): one wasted epoll_wait per message, ~1.5 us of CPU here (docs/bench/notes.md).
// Skipping it is never wrong: the sleep's blocking turn returns at once if events did come.
bool handler_thread_runtime::poll_after_wake() {
  if (!std::exchange(first_poll_after_wake_, false)) {
    return poll_loop();
  }
  if (!wake_poll_.should_try()) {
    return false;
  }
  const bool found = poll_loop();
  wake_poll_.record(found);
  return found;
}

// One non-blocking turn of the loop; whether it ran callbacks. The loop's time is a clock
// reading from a round that ran callbacks (its start, or a timer start in it).
bool handler_thread_runtime::poll_loop() {
  const bool ran = loop_->run_nowait();
  last_poll_ = ran ? loop_->now() : clock::now();
  return ran;
}

// Spins for at most spin_budget_, which adapts: a spin that found work doubles it (up to
// options_.spin_before_sleep), one that ran out halves it (down to kMinSpin). On a machine with
// idle cores the partner's work arrives while spinning and the budget stays full; on a busy one
// spinning would only take the CPU from the thread that is to send the work, so the budget
// shrinks and the thread goes to sleep almost at once. After kSpinBeforeYield the spin also
// yields at each look at the clock: when the thread that is to send the work waits for this
// CPU (no idle core), it runs then, and the handoff costs a context switch, not a wake-up.
bool handler_thread_runtime::spin() noexcept {
  if (spin_budget_ <= clock::duration::zero()) {
    return false;
  }
  // Between two looks at the inbox the thread pauses kPausesPerLook times (~80 ns): looking
  // reads each producer's ring index, and every read pulls that cache line away from a producer
  // that is writing it, so looking constantly would slow it down. The clock is read every
  // kLooksPerClockCheck looks.
  constexpr unsigned kPausesPerLook = 4;
  constexpr unsigned kLooksPerClockCheck = 8;
  const clock::time_point started = clock::now();
  const clock::time_point deadline = started + spin_budget_;
  for (unsigned look = 1;; ++look) {
    if (inbox_.looks_busy() || hook_has_work(this)) {
      grow_spin();
      return true;
    }
    for (unsigned pause = 0; pause < kPausesPerLook; ++pause) {
      cpu_relax();
    }
    if (look % kLooksPerClockCheck != 0) {
      continue;
    }
    const clock::time_point now = clock::now();
    if (now >= deadline) {
      spin_budget_ = std::max<clock::duration>(
          spin_budget_ / 2, std::min<clock::duration>(kMinSpin, options_.spin_before_sleep));
      return false;
    }
    if (yield_at_once_ || now - started >= kSpinBeforeYield) {
      yield_and_learn(now);
    }
  }
}

// A yield that took long ran another thread on this CPU; if the work is there when it returns,
// the sender shares this CPU, and the next spins yield at once instead of spinning first. A
// yield that returns at once with no work means nobody else wanted the CPU: spin first again.
void handler_thread_runtime::yield_and_learn(clock::time_point before) noexcept {
  std::this_thread::yield();
  const bool switched = clock::now() - before >= kLongYield;
  if (switched && inbox_.looks_busy()) {
    yield_at_once_ = true;
  } else if (!switched) {
    yield_at_once_ = false;
  }
}

// A nap first (see "Naps" in inbox.h): announced without the heavy fence, bounded by the nap
// timer. Only after a nap that ended with nothing to do does the next sleep announce with the
// heavy fence and go without a bound, so a thread pays that fence once per idle period, not
// once per gap between two messages. The next sleep, not this one: the thread first goes back
// through run()'s round (its inbox, the idle hook, which may re-mark a pool worker idle).
//
// But the fence costs that much only when it interrupts other running threads of the process.
// When none runs (a lone thread serving sockets at light load, the others asleep) it is one
// system call (~1.2 us here), cheaper than a nap's timers (a bounded wait in the kernel, and
// a timerfd for bounds below 1 ms that often fires in a later sleep): ~2 us of CPU per message
// at one echo connection (docs/bench/notes.md). So the heavy fence is tried before naps too,
// while it keeps being cheap (cheap_fence_, common/detail/adaptive_attempts.h); once it was
// dear twice in a row, naps again, retrying every 16th to 256th sleep. Either way the sleep is
// correct: unbounded after the heavy fence, bounded after the light one.
void handler_thread_runtime::sleep() {
  const bool idle_period = nap_expired_ || options_.nap <= options_.nap.zero();
  const bool trying_fence = !idle_period && cheap_fence_.should_try();
  const bool deep = idle_period || trying_fence;
  clock::duration fence_took{};
  if (!may_sleep(deep ? inbox::sleep_fence::heavy : inbox::sleep_fence::light,
                 trying_fence ? &fence_took : nullptr)) {
    return;
  }
  if (trying_fence) {
    cheap_fence_.record(fence_took <= kCheapFence);
  }
  const clock::time_point fell_asleep = clock::now();
  if (!deep) {
    nap_->start();
  }
  inbox_.count_sleep(!deep);
  loop_->run_once();
  inbox_.woke();
  nap_expired_ = !deep && !nap_->is_active();
  nap_->stop();
  // Whatever ended the sleep (a post's wake-up, io, a timer, the nap) ran a callback, and the
  // loop read the clock for it; a round without one leaves the loop's time older than
  // fell_asleep.
  last_poll_ = loop_->now();
  if (last_poll_ < fell_asleep) {
    last_poll_ = clock::now();
  }
  // A pool worker's wake-up for the pool's queue is a post's, not the loop's.
  loop_woke_ = !nap_expired_ && !inbox_.looks_busy() && !hook_has_work(this);
  first_poll_after_wake_ = loop_woke_;
  learn_from_sleep(last_poll_ - fell_asleep);
}

bool handler_thread_runtime::may_sleep(inbox::sleep_fence fence, clock::duration* fence_took) {
  switch (inbox_.prepare_sleep(&hook_has_work, this, fence, fence_took)) {
    case inbox::sleep_check::work:
      grow_spin();  // the work came just after the spin gave up: a longer one would have seen it
      return false;
    case inbox::sleep_check::producer_busy:
      // Its thread may be preempted on this CPU: spinning would only keep it from finishing.
      std::this_thread::yield();
      return false;
    case inbox::sleep_check::may_sleep:
      break;
  }
  return true;
}

void handler_thread_runtime::grow_spin() noexcept {
  spin_budget_ = std::min<clock::duration>(spin_budget_ * 2, options_.spin_before_sleep);
}

// A sleep that a post ended sooner than a full spin would have lasted means spinning would
// have caught the post without the wake-up syscalls: the budget grows to cover that gap. Without
// this, two threads that talk to each other settle into sleeping on every message once their
// budgets have shrunk below the wake-up latency (each reply then arrives only after a wake-up,
// too late for the other's spin), and stay there.
void handler_thread_runtime::learn_from_sleep(clock::duration slept) noexcept {
  if (slept >= options_.spin_before_sleep || !inbox_.looks_busy()) {
    return;  // a long gap, or woken by the loop (a timer, io), not by a post
  }
  spin_budget_ =
      std::min<clock::duration>(std::max(spin_budget_, slept) * 2, options_.spin_before_sleep);
}

bool handler_thread_runtime::hook_has_work(void* self) noexcept {
  auto* runtime = static_cast<handler_thread_runtime*>(self);
  return runtime->hook_ != nullptr && runtime->hook_->has_work(runtime->owner_);
}

// ---- delayed work -------------------------------------------------------------------------

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
