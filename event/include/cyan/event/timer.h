#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "cyan/event/detail/watcher.h"
#include "cyan/event/loop.h"

namespace cyan::event {

/// Runs its callback once `timeout` after start(), then every `repeat` (when non-zero) until
/// stopped. Durations are kept as double seconds (libev's unit). Sub-millisecond timeouts are
/// honoured on every backend: libev's epoll and poll backends round any wait up to 1 ms, so for
/// a timeout (or repeat) below 1 ms the loop also arms a timerfd that ends the wait on time (one
/// syscall per such start).
///
/// Never early: the countdown starts when start() (or reset()) is called, from a clock reading
/// taken then (loop::now() becomes it), also from inside a callback whose round began long
/// before. The callback never runs before `timeout` has passed since start() by
/// std::chrono::steady_clock, for every duration on every backend; each later expiry of a
/// repeating timer comes `repeat` after the previous deadline. Timers with equal deadlines fire
/// in the order they were started (or reset), and so do timers started with equal timeouts.
///
/// Thread rules and moving: see detail::watcher_base (a moved active timer keeps its deadline).
class timer : public detail::basic_watcher<> {
 public:
  /// Any std::chrono duration converts to this implicitly.
  using duration = std::chrono::duration<double>;

  /// An inactive one-shot timer with a zero timeout. Throws std::invalid_argument when `owner`
  /// is null.
  explicit timer(std::shared_ptr<loop> owner);
  timer(timer&& other) noexcept;
  timer& operator=(timer&& other) noexcept;
  ~timer() = default;

  /// Time from start() (or reset()) to the first expiry; zero fires on the next loop round.
  /// Takes effect at the next start() or reset(). Throws std::invalid_argument when negative.
  void set_timeout(duration timeout);

  /// Interval between later expiries; zero (the default) makes the timer one-shot. Takes effect
  /// at the next start() or reset(). Throws std::invalid_argument when negative.
  void set_repeat(duration repeat);

  [[nodiscard]] duration timeout() const noexcept { return duration(timeout_); }
  [[nodiscard]] duration repeat() const noexcept { return duration(repeat_); }

  /// Starts the countdown; does nothing when already active (starting twice fires once).
  void start();

  /// Restarts the countdown from now (an inactivity timeout): the timer fires `timeout` from
  /// now, then every `repeat`, whether it was active or not. Drops an expiry not yet delivered.
  void reset();

  /// Time left until the next expiry, by a clock reading taken now (not the loop's time of
  /// its last round: a callback that ran long has used up part of it); zero when inactive.
  [[nodiscard]] duration remaining() const noexcept;

 private:
  void on_raw_event(int revents) noexcept override;
  void start_countdown();
  void wake_on_time(double wait) noexcept;
  void wait_until_due() const noexcept;

  double timeout_ = 0.0;
  double repeat_ = 0.0;
  /// Deadline of the next expiry on libev's monotonic clock, and the start order used to break
  /// ties between equal deadlines.
  double deadline_ = 0.0;
  std::uint64_t sequence_ = 0;
  /// The first expiry's due time on loop::clock: start()'s clock reading plus the timeout
  /// (min once it expired). deadline_ is no earlier, but for the rounding of libev's doubles.
  loop::clock::time_point due_ = loop::clock::time_point::min();
};

}  // namespace cyan::event
