#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stop_token>
#include <vector>

#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/event/async.h"
#include "cyan/event/detail/coroutine_stop.h"
#include "cyan/event/io.h"
#include "cyan/event/loop.h"

namespace cyan::event {

/// Blocks `numbers` in the calling thread (pthread_sigmask), so that the kernel keeps them
/// pending for a signal_set instead of running their default action in this thread. Call it at
/// the start of main(), before any thread that is not cyan's starts (new threads inherit the
/// mask). Throws std::invalid_argument for a number signal_set does not accept. [any thread]
void block_signals(std::initializer_list<int> numbers);

/// Delivers signals to one loop — any thread's, not only the main loop's — through a signalfd:
///
///     signal_set signals{ loop, { SIGINT, SIGTERM } };
///     signals.set_callback([](int signal_number) { ... });
///     signals.start();
///
/// or, in a coroutine on the loop's thread, `int number = co_await signals.wait();`.
///
/// Signal masks: a signalfd sees a signal only while every thread of the process blocks it
/// (a thread that does not would take the signal itself, and SIGINT's or SIGTERM's default
/// action ends the process). cyan's own threads (handler threads, pool workers) block every
/// asynchronous signal from birth; the constructor blocks `numbers` in the calling thread; any
/// other thread — the main thread first of all, when the set is made on another thread — must
/// block them too: call block_signals() at the start of main(). A child process started from
/// a thread inherits its blocked mask: reset it for the child (posix_spawnattr_setsigmask).
///
/// Delivery: each signal the set reads goes to the longest-waiting wait(), else to the
/// callback; with neither it is kept, in order, for the next wait(). A standard signal raised
/// again while still pending is merged by the kernel into one (real-time signals queue).
/// Several sets may watch the same number: one of them reads each raise.
///
/// Thread rules: constructed on any thread (like a watcher); start(), stop(), set_callback(),
/// wait() and destruction are the loop thread's. Not movable: waits refer to the set.
class signal_set : noncopyable {
 public:
  class wait_awaiter;

  /// Watches `numbers` on `owner` (not started). Blocks them in the calling thread. Throws
  /// std::invalid_argument for a null loop, an empty list, a number outside 1..NSIG-1 or one
  /// that cannot be caught (SIGKILL, SIGSTOP); std::system_error when signalfd() fails.
  signal_set(std::shared_ptr<loop> owner, std::initializer_list<int> numbers);
  /// Stops; a wait() still pending ends with std::system_error(operation_canceled).
  ~signal_set();

  /// Sets the function run on the loop thread with each signal's number that no wait() takes;
  /// an empty one keeps signals for wait() instead. What it throws goes to the loop's error
  /// handler.
  void set_callback(unique_function<void(int)> callback);

  /// Starts reading signals; does nothing when active. wait() starts the set by itself.
  void start();
  /// Stops reading (signals stay pending in the kernel meanwhile); waits still pending end with
  /// operation_canceled.
  void stop() noexcept;
  /// True between start() (or a wait()) and stop().
  [[nodiscard]] bool is_active() const noexcept { return watcher_.is_active(); }

  /// The watched numbers, as given.
  [[nodiscard]] const std::vector<int>& numbers() const noexcept { return numbers_; }

  /// `co_await signals.wait()` suspends until the set reads a signal and yields its number (at
  /// once when one is kept). Starts the set. In a cyan::dispatch task, a stop request ends it
  /// with std::system_error(operation_canceled); so do stop() and the set's destruction.
  [[nodiscard]] wait_awaiter wait() noexcept;

  /// The loop the set delivers on.
  [[nodiscard]] const std::shared_ptr<loop>& get_loop() const noexcept { return loop_; }

 private:
  void read_signals();
  void deliver(int number);
  void end_canceled_waits() noexcept;
  bool add_waiter(wait_awaiter& waiter);
  void remove_waiter(wait_awaiter& waiter) noexcept;

  std::shared_ptr<loop> loop_;
  std::vector<int> numbers_;
  int fd_ = -1;
  io watcher_;
  async canceler_;  // a stop request on another thread wakes the loop to end its wait
  unique_function<void(int)> callback_;
  std::deque<int> kept_;
  std::vector<wait_awaiter*> waiters_;  // oldest first
};

/// What signal_set::wait() returns (see there).
class signal_set::wait_awaiter {
 public:
  explicit wait_awaiter(signal_set& set) noexcept : set_(set) {}
  wait_awaiter(const wait_awaiter&) = delete;
  wait_awaiter& operator=(const wait_awaiter&) = delete;
  ~wait_awaiter();

  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) {
    coroutine_ = suspended;
    return suspend(detail::coroutine_stop_token(suspended));
  }
  /// The signal's number; throws std::system_error(operation_canceled) as wait() says.
  int await_resume();

 private:
  friend class signal_set;
  struct on_stop {
    wait_awaiter* self;
    void operator()() const noexcept;
  };
  bool suspend(std::stop_token token);
  void finish(int number) noexcept;  // 0: canceled

  signal_set& set_;
  std::coroutine_handle<> coroutine_;
  int number_ = 0;
  bool waiting_ = false;
  std::atomic<bool> stop_requested_{ false };
  std::optional<std::stop_callback<on_stop>> stop_;
};

}  // namespace cyan::event
