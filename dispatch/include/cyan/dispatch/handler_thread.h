#pragma once

#include <any>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "cyan/common/detail/saturating_time.h"
#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/dispatch/detail/inbox.h"
#include "cyan/dispatch/detail/outstanding_work.h"
#include "cyan/dispatch/detail/schedule_awaiter.h"
#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/future.h"
#include "cyan/dispatch/handler.h"
#include "cyan/dispatch/serial_token.h"
#include "cyan/dispatch/stop_mode.h"

namespace cyan::event {
class loop;
}

namespace cyan::dispatch {

class handler_thread;

struct handler_thread_options;

namespace detail {
class idle_hook;
class handler_thread_runtime;
void wake_if_sleeping(handler_thread& worker) noexcept;
std::unique_ptr<handler_thread> start_pool_worker(idle_hook& hook, handler_thread_options options);
}  // namespace detail

/// How a handler_thread is set up.
struct handler_thread_options {
  /// The thread's name as shown by top, gdb and perf (Linux keeps 15 bytes). Empty: unnamed.
  std::string name;
  /// The CPU to pin the thread to. Empty: no pinning. An impossible CPU makes the constructor
  /// throw std::system_error.
  std::optional<unsigned> cpu;
  /// How long, at most, a thread whose inbox ran empty keeps looking for work before it
  /// sleeps in its loop: a short spin saves the wake-up syscall (and its latency) when work
  /// follows soon, the common case between threads that talk to each other. The spin adapts
  /// (it shrinks while spinning finds nothing, e.g. on a machine with no idle core, and grows
  /// back when it does, or when a post ends a sleep sooner than a full spin would have lasted).
  /// Zero: sleep at once. After the spin the thread naps or sleeps (see `nap`); either way an
  /// idle thread uses no CPU once that is over.
  std::chrono::nanoseconds spin_before_sleep = std::chrono::microseconds(50);
  /// How long the first sleep of an idle period lasts at most when the process-wide fence is
  /// dear: a nap is announced without that fence (see "Naps" in detail/inbox.h), so a post
  /// racing with the announcement may go unseen until the nap ends. Only after a nap that ended
  /// with nothing to do does the thread announce with the fence and sleep without a bound.
  /// The fence is dear only while other threads of the process run (it interrupts them); a
  /// thread whose fences keep costing no more than a system call (10 us at most) announces
  /// with it and sleeps without a bound every time (stats().naps counts the naps). Zero: no
  /// naps, every sleep is unbounded (and pays the fence), so a post never waits for a nap.
  std::chrono::nanoseconds nap = std::chrono::microseconds(200);
};

/// Counters of a handler_thread, read together by stats(). queued is posted - executed -
/// cancelled: work accepted that has not started, delayed work that is not due included.
struct handler_thread_stats {
  std::uint64_t posted = 0;     ///< closures and messages accepted (delayed ones included)
  std::uint64_t executed = 0;   ///< started (a task that threw counts, a running one counts)
  std::uint64_t cancelled = 0;  ///< discarded by stop, or delayed past the stop
  std::uint64_t queued = 0;     ///< waiting to start
  /// Producer lanes into the inbox (see "Lanes" in detail/inbox.h): one per thread that has
  /// posted more than a few times and whose lane the handler thread has not retired yet (it
  /// retires a lane once the producer thread has exited and the lane is empty).
  std::uint64_t lanes = 0;
  /// Times the thread blocked in its loop for want of work (see handler_thread_options).
  std::uint64_t sleeps = 0;
  /// How many of those sleeps were naps: bounded by handler_thread_options::nap, announced
  /// without the process-wide fence because that fence was dear (it interrupts the process's
  /// other running threads).
  std::uint64_t naps = 0;
  /// Heavy fences the thread timed before a sleep (it tries the fence while the fence keeps
  /// being cheap) that took longer than a cheap one: two in a row make it nap for a while, a
  /// retry that is dear again for twice as long. Noise on a busy host shows up here too.
  std::uint64_t dear_fences = 0;
};

/// One thread with its own event loop and a lock-free inbox: other threads post() closures to
/// it or send() messages to its handler, and it runs them one at a time, in post order per
/// posting thread. Posts from different threads are not ordered with each other (each thread
/// has its own lane), even when one happens before the other: post from one thread, or use a
/// serial_token, when a total order matters.
///
/// Thread safety: every member is [any thread] unless marked otherwise. The thread itself owns
/// its event loop (get_event_loop()) and the handler's callbacks.
///
/// Work: a closure that fits unique_function's inline buffer is posted without allocating and
/// without a syscall while the thread is busy; an idle thread sleeps in its loop (no CPU used)
/// and the first post wakes it. Exceptions from closures and from on_message() go to the
/// handler's on_error() (to stderr without a handler) and the thread keeps running.
///
/// Stop: explicit. stop() asks the thread to finish (drain or discard, see stop_mode) and
/// returns at once; join() waits for it; the destructor does stop(drain) then join(). Work
/// that will never run (discarded, or delayed past the stop) is destroyed unrun, which completes
/// its awaitable with task_cancelled. Posting after stop() throws executor_stopped. Token tasks
/// (post(token, f)) accepted before the stop count as posted even while they wait in the token
/// for an earlier task on another executor: the thread serves its inbox (and sleeps when idle)
/// until the token has handed each of them over, and then runs it (drain) or cancels it
/// (discard). So a stop may take as long as those earlier tasks; delayed work that comes due
/// meanwhile runs (drain).
class handler_thread : noncopyable {
 public:
  using options = handler_thread_options;
  using clock = std::chrono::steady_clock;

  /// Starts a thread without a handler: it runs posted closures; a message sent to it is
  /// reported on stderr. Throws std::system_error when the thread cannot be started or pinned.
  handler_thread();
  /// As above, with a name, CPU affinity or spin time.
  explicit handler_thread(options opts);
  /// Starts a thread for `h`: h.on_initialize() runs on it first. `h` must outlive the thread
  /// (stop and join it, or destroy this object, before `h` is destroyed).
  explicit handler_thread(handler& h, options opts = {});

  /// stop(stop_mode::drain) and join(). Must not run on this thread itself (it cannot join
  /// itself): that aborts with a message.
  ~handler_thread();

  /// Runs `f()` on this thread. Throws executor_stopped after stop(), std::bad_alloc when a
  /// closure too big for the inline buffer cannot be allocated.
  template <detail::postable F>
  void post(F&& f) {
    inbox_.post(std::forward<F>(f));
  }

  /// Runs `f()` on this thread once `delay` has passed (measured from this call; a delay of
  /// zero or less runs it as soon as possible). If the thread stops first, `f` is destroyed
  /// unrun. Throws like post().
  template <detail::postable F, typename Rep, typename Period>
  void post(F&& f, std::chrono::duration<Rep, Period> delay) {
    inbox_.post_delayed(unique_function<void()>(std::forward<F>(f)), deadline_after(delay));
  }

  /// Runs `f()` on this thread after every earlier task of `token` has finished and before any
  /// later one starts, even when the token's other tasks go to a thread_pool or to another
  /// handler_thread. Throws like post(); once it returned, a stop() no longer refuses `f` (it
  /// runs it, or cancels it with discard), however late the token hands it over.
  template <detail::postable F>
  void post(const serial_token& token, F&& f) {
    // The token may hand f over later, after a stop(): counting the post keeps the thread from
    // finishing before submit() has counted f in the tracker (see "Stop" in
    // detail/outstanding_work.h); after stop() the check refuses f, loudly.
    const detail::outstanding_work::scope counted(work_);
    inbox_.throw_if_stopped();
    detail::serial_access::submit(
        token, std::forward<F>(f),
        [this](unique_function<void()> job) { inbox_.post_handed_over(std::move(job)); },
        &work_.tokens());
  }

  /// Runs `f()` on this thread and returns the future of its result; the future reports what
  /// `f` threw, or task_cancelled when `f` never runs (discarded at stop). Throws like post().
  template <detail::awaitable_callable F>
  [[nodiscard]] auto post_awaitable(F&& f) -> future<detail::task_result_t<F>> {
    auto [result, job] = detail::package(std::forward<F>(f));
    inbox_.post(std::move(job));
    return std::move(result);
  }

  /// post_awaitable() once `delay` has passed; task_cancelled when the thread stops first.
  template <detail::awaitable_callable F, typename Rep, typename Period>
  [[nodiscard]] auto post_awaitable(F&& f, std::chrono::duration<Rep, Period> delay)
      -> future<detail::task_result_t<F>> {
    auto [result, job] = detail::package(std::forward<F>(f));
    inbox_.post_delayed(unique_function<void()>(std::move(job)), deadline_after(delay));
    return std::move(result);
  }

  /// post_awaitable() in `token`'s order (see post(token, f)).
  template <detail::awaitable_callable F>
  [[nodiscard]] auto post_awaitable(const serial_token& token, F&& f)
      -> future<detail::task_result_t<F>> {
    auto [result, job] = detail::package(std::forward<F>(f));
    post(token, std::move(job));
    return std::move(result);
  }

  /// `co_await thread.schedule()` moves the calling cyan::dispatch::task to this thread: it
  /// resumes here, and this thread is its home from then on (see cyan::dispatch::schedule).
  [[nodiscard]] detail::schedule_awaiter schedule() noexcept {
    return detail::schedule_awaiter(detail::executor_access::ref(*this));
  }

  /// Delivers `message` to the handler's on_message() on this thread. Throws like post().
  void send(std::any message);

  /// Delivers `message` once `delay` has passed; dropped (destroyed) if the thread stops first.
  template <typename Rep, typename Period>
  void send_delayed(std::any message, std::chrono::duration<Rep, Period> delay) {
    send_at(std::move(message), deadline_after(delay));
  }

  /// Same as send_delayed().
  template <typename Rep, typename Period>
  void send(std::any message, std::chrono::duration<Rep, Period> delay) {
    send_at(std::move(message), deadline_after(delay));
  }

  /// Asks the thread to finish and returns without waiting (so it may be called on the thread
  /// itself, e.g. from a posted closure). Only the first call's mode counts, except that
  /// stop(discard) after stop(drain) still discards what has not started yet. Never throws.
  void stop(stop_mode mode = stop_mode::drain) noexcept;

  /// Waits until the thread has finished (on_finalize() returned), which after stop() includes
  /// its token tasks still waiting for other executors (see "Stop" above). Returns at once when
  /// it already has. Needs a stop() first, or it waits forever. Throws std::system_error
  /// (resource_deadlock_would_occur) on the thread itself.
  void join();

  /// True until the thread has finished: after stop() it is still running while it drains.
  [[nodiscard]] bool is_running() const noexcept;
  /// True between stop() and the end of the thread.
  [[nodiscard]] bool is_stopping() const noexcept;

  /// The thread's event loop, for timers, sockets and other watchers. The loop is
  /// loop-thread-only: use it from this thread (e.g. inside a posted closure).
  [[nodiscard]] std::shared_ptr<event::loop> get_event_loop() const noexcept;

  /// The thread's id (still valid after it finished).
  [[nodiscard]] std::thread::id get_id() const noexcept;

  /// Whether the calling thread is this handler thread.
  [[nodiscard]] bool is_current() const noexcept { return std::this_thread::get_id() == get_id(); }

  /// A snapshot of the counters; exact once the thread is idle or finished.
  [[nodiscard]] handler_thread_stats stats() const;

 private:
  friend class detail::handler_thread_runtime;
  friend struct detail::executor_access;
  friend void detail::wake_if_sleeping(handler_thread& worker) noexcept;
  friend std::unique_ptr<handler_thread> detail::start_pool_worker(detail::idle_hook&,
                                                                   handler_thread_options);

  // A pool worker (see detail::start_pool_worker()).
  handler_thread(detail::idle_hook& hook, options opts);

  template <typename Rep, typename Period>
  static clock::time_point deadline_after(std::chrono::duration<Rep, Period> delay) {
    const auto now = clock::now();
    // A delay past the clock's range means "never due" (such work is cancelled at stop).
    return delay <= delay.zero() ? now : cyan::detail::saturating_add(now, delay);
  }

  void send_at(std::any message, clock::time_point due);
  // The token tracker's error sink (see serial_tracker::report()).
  static bool report_token_error(void* self, std::exception_ptr error) noexcept;
  // After stop(): whether work accepted earlier may still be handed over to inbox_. [the thread]
  [[nodiscard]] bool expecting_hand_overs() const noexcept { return !work_.drained(); }
  // work_'s on_drop: a count it waits for dropped to zero after the stop.
  static void on_work_drop(void* self) noexcept;
  static void resume_later(void* self, unique_function<void()>&& job) noexcept;
  static const detail::executor_vtable vtable;

  detail::inbox inbox_;
  std::unique_ptr<detail::handler_thread_runtime> runtime_;
  // Last: destroyed first, it waits until no serial_token still holds a task for inbox_ and no
  // on_drop call (which wakes the thread) runs.
  detail::outstanding_work work_{ &on_work_drop, this, &report_token_error };
};

}  // namespace cyan::dispatch
