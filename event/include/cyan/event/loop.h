#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/event/detail/watcher.h"

// libev's loop. Spelled `struct ev_loop` below because <ev.h> also declares a function of that
// name; using cyan::event needs no <ev.h>.
struct ev_loop;

namespace cyan::event {

/// The kernel interface a loop polls with (values are libev's EVBACKEND_* flags).
enum class backend : unsigned {
  automatic = 0,  ///< libev's recommendation for this system (epoll on Linux)
  select = 0x01,
  poll = 0x02,
  epoll = 0x04,
  kqueue = 0x08,
  port = 0x20,
  linux_aio = 0x40,
  io_uring = 0x80,
};

/// "epoll", "io_uring", ... ("automatic" for backend::automatic). [any thread]
[[nodiscard]] std::string_view to_string(backend value) noexcept;

namespace detail {
struct loop_callbacks;
}  // namespace detail

/// An event loop (libev underneath): runs the callbacks of the timers, async, idle, signal and
/// io watchers attached to it, on one thread.
///
/// Thread rules: a loop belongs to one thread, its *loop thread*: the thread that first runs it
/// (start, run_once or run_nowait); until then, the thread that created it (for the main loop,
/// the process's main thread, the one that ran main()). Every member of a loop or watcher is
/// loop-thread-only unless marked [any thread]; debug builds assert it once the loop has run.
/// Before its first run a loop may be prepared (watchers created and started) by any one thread
/// at a time, so it can be built on one thread and handed to the thread that will run it. Run
/// functions must not be called from inside one of the loop's own callbacks (std::logic_error).
///
/// Errors: an exception thrown by a watcher's callback never reaches libev; it goes to the
/// error handler (default: print to stderr) and the loop keeps running.
///
/// Not fork-safe: a child process must not use a loop of its parent.
class loop : noncopyable {
 public:
  using clock = std::chrono::steady_clock;
  using error_handler = unique_function<void(std::exception_ptr)>;

  /// Creates a loop polling with `backend`. Throws std::runtime_error when libev on this system
  /// does not support it, std::system_error when the kernel refuses it.
  explicit loop(event::backend backend = event::backend::automatic);

  /// Destroys the libev loop. Every watcher holds a shared_ptr to its loop, so none is left.
  ~loop();

  /// Runs callbacks until stop() (watchers or none); returns at once when a stop() arrived
  /// before it. The caller keeps the loop alive meanwhile (holds a shared_ptr). Throws
  /// std::logic_error when called from one of this loop's callbacks. (A watcher's start() arms
  /// the watcher; the loop runs, as in libuv's uv_run and Asio's io_context::run.)
  void run();

  /// The old name of run(), kept for one release.
  [[deprecated("use loop::run(); a watcher's start() arms it, a loop runs")]] void start() {
    run();
  }

  /// Waits for at least one event (a stop() counts as one) and runs what is ready, once.
  void run_once();

  /// Runs the callbacks of the events ready now, without waiting. Returns whether it ran any
  /// (false: nothing was ready).
  bool run_nowait();

  /// Makes the running run() (or run_once()) return once the callbacks already due in this
  /// round have run; when the loop is not running, the next run() returns at once. Wakes a
  /// loop that is waiting. [any thread]
  void stop() noexcept;

  /// The loop's idea of the current time: read each time the loop wakes up to run callbacks,
  /// and again by every timer start() or reset(), whose countdown starts from that reading.
  [[nodiscard]] clock::time_point now() const noexcept { return now_; }

  /// True while run(), run_once() or run_nowait() runs: inside the loop's callbacks. Then
  /// now() is no older than the start of this round; outside, it is as old as the last round or
  /// timer start.
  [[nodiscard]] bool in_round() const noexcept { return running_; }

  /// The backend this loop polls with (never backend::automatic).
  [[nodiscard]] event::backend backend() const noexcept;

  /// True when the caller runs on this loop's thread. [any thread]
  [[nodiscard]] bool is_loop_thread() const noexcept;

  /// True when the caller may make loop-thread-only calls: it is the loop thread, or the loop
  /// has not run yet (see the thread rules above). What debug builds assert; for code that
  /// builds its own watchers on a loop. [any thread]
  [[nodiscard]] bool may_be_used_here() const noexcept;

  /// True for the main loop (get_main_loop()). [any thread]
  [[nodiscard]] bool is_main() const noexcept { return is_main_; }

  /// Replaces the function that receives exceptions thrown by callbacks; an empty one restores
  /// the default (print to stderr). It runs on the loop's thread; what it throws is printed.
  void set_error_handler(error_handler handler) noexcept;

  /// libev's loop, for code that drives libev directly (its userdata and invoke-pending hook
  /// belong to cyan). [any thread]
  [[nodiscard]] struct ev_loop* native_handle() const noexcept { return raw_; }

  /// Backends libev supports on this system, in libev's order of preference. [any thread]
  [[nodiscard]] static std::vector<event::backend> supported_backends();

  /// The backends backend::automatic chooses from. [any thread]
  [[nodiscard]] static std::vector<event::backend> recommended_backends();

 private:
  friend class detail::watcher_base;
  friend class timer;
  friend struct detail::loop_callbacks;
  friend std::shared_ptr<loop> get_main_loop();

  struct main_loop_tag {};
  /// The main loop: libev's default loop.
  explicit loop(main_loop_tag);

  void attach(struct ev_loop* raw);
  void begin_run();
  void end_run() noexcept { running_ = false; }
  void invoke_pending() noexcept;
  void report_error(std::exception_ptr error) noexcept;
  /// Before a timer starts, also inside a round (whose time may be long past): reads the clock
  /// into now(), then brings libev's time up to date, so that a countdown libev starts next ends
  /// no earlier than the same countdown from the returned now().
  clock::time_point refresh_time() noexcept;
  std::uint64_t next_timer_sequence() noexcept { return timer_sequence_++; }
  void run_queued_events() noexcept;
  /// Makes the loop wake up by `deadline` even where libev would wait longer: libev raises any
  /// wait shorter than its backend's minimum (1 ms for epoll and poll) to that minimum, so a
  /// shorter timer would fire up to 1 ms late. For timers whose timeout is below
  /// kCoarseBackendWait; one timerfd per loop, armed for the earliest such deadline.
  void wake_by(clock::time_point deadline) noexcept;
  /// The shortest wait libev's epoll, poll, linux_aio and io_uring backends honour.
  static constexpr std::chrono::milliseconds kCoarseBackendWait{ 1 };

  struct ev_loop* raw_ = nullptr;
  const bool is_main_;
  bool running_ = false;        // loop thread only: inside ev_run
  bool ran_callbacks_ = false;  // loop thread only: this round had something pending
  /// The loop thread; written by the first run (re-binding), read by is_loop_thread().
  std::atomic<std::thread::id> owner_;
  /// Set by the first run; until then any thread may prepare the loop.
  std::atomic<bool> has_run_{ false };
  /// Set by stop() on any thread, cleared by the loop thread when it acts on it.
  std::atomic<bool> stop_requested_{ false };
  detail::raw_watcher stop_watcher_;  // an ev_async
  clock::time_point now_;
  error_handler error_handler_;
  std::uint64_t timer_sequence_ = 0;
  /// Events deferred by watcher_base::queue_event() during this round (expired timers).
  std::vector<detail::queued_event> queued_events_;
  /// See wake_by(): whether the backend rounds short waits up, the timerfd (-1: none yet, or
  /// none to be had), its ev_io, and the deadline it is armed for (max: not armed).
  bool coarse_waits_ = false;
  int precise_wake_fd_ = -1;
  detail::raw_watcher precise_wake_watcher_;
  clock::time_point precise_wake_at_ = clock::time_point::max();
};

/// The main loop: libev's default loop, the only one that may own signal watchers. Created on
/// first use and owned by the process's main thread (whichever thread calls this first); like
/// every libev default loop it reaps child processes (SIGCHLD) while it runs. [any thread]
[[nodiscard]] std::shared_ptr<loop> get_main_loop();

}  // namespace cyan::event

namespace cyan::this_thread {

/// The calling thread's loop: the main loop on the process's main thread, otherwise a loop
/// created on first use and released when the thread exits (watchers keep it alive longer).
/// [any thread, about itself]
[[nodiscard]] std::shared_ptr<event::loop> get_event_loop();

}  // namespace cyan::this_thread
