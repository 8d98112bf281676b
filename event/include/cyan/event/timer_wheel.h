#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <ratio>
#include <type_traits>
#include <utility>

#include "cyan/common/noncopyable.h"
#include "cyan/event/detail/timer_wheel_core.h"
#include "cyan/event/detail/wheel_divider.h"
#include "cyan/event/loop.h"
#include "cyan/event/timer.h"

namespace cyan::event {
namespace detail {

struct wheel_round_end;  // libev's callback for timer_wheel's ev_prepare

template <typename D>
inline constexpr bool is_chrono_duration = false;
template <typename Rep, typename Period>
inline constexpr bool is_chrono_duration<std::chrono::duration<Rep, Period>> = true;

/// True for a std::chrono::duration that counts a whole number of nanoseconds in an integer: the
/// delays timer_wheel::post() takes.
template <typename D>
concept whole_nanoseconds = is_chrono_duration<D> && std::is_integral_v<typename D::rep> &&
                            !std::is_same_v<typename D::rep, bool> &&
                            std::ratio_divide<typename D::period, std::nano>::den == 1;

/// `count` clamped to [0, max]; `max` < 2^63.
template <typename Rep>
[[nodiscard]] constexpr std::uint64_t clamp_count(Rep count, std::uint64_t max) noexcept {
  if constexpr (std::is_signed_v<Rep>) {
    // One comparison for the usual case: a negative count becomes at least 2^63 here.
    const auto wide = static_cast<std::uint64_t>(static_cast<std::int64_t>(count));
    if (wide <= max) [[likely]] {
      return wide;
    }
    return count < 0 ? 0 : max;
  } else {
    const auto wide = static_cast<std::uint64_t>(count);
    return wide <= max ? wide : max;
  }
}

}  // namespace detail

/// Very many one-shot timeouts on one loop for the price of one loop timer: a hashed,
/// hierarchical timing wheel (6 levels of 64 slots, then an overflow list, so any delay works)
/// with O(1) post() and cancel() that allocate nothing once the wheel has held its peak number of
/// entries (or reserve() made room), for callbacks of at most 16 bytes (two pointers, e.g.
/// `[this, request]`) that are nothrow movable; a larger closure (a cyan::unique_function too)
/// is moved into one heap allocation per post. An entry costs 48 bytes, and cancelling one whose
/// closure is trivially destructible touches only 16 of them. For request deadlines, idle
/// connections, retries — timeouts that are mostly cancelled before they fire.
///
/// Timing: time is cut into ticks of `resolution` (default 1 ms) on loop::clock (steady). An
/// entry posted with `delay` is due `delay` after the post, counted from a clock reading taken at
/// or after the post, also from inside a callback whose round began long before. It runs on the
/// first tick boundary at or after its due time (never earlier by steady_clock), which on an
/// unloaded loop is within one tick of it. Entries due at the same tick run in post order (so
/// equal delays run in post order); one posted with no delay from a wheel callback runs on the
/// next tick.
///
/// Clock reads: posts from the loop's callbacks with a delay in milliseconds or seconds (on a
/// wheel whose resolution divides 1 ms, as the default does) read no clock. They are due as if
/// posted at the wheel's last reading, and checked against the next one, which comes after at
/// most 64 such posts, when the loop timer fires (before any entry runs) or when the loop next
/// prepares to wait (in run(), right after the round's callbacks; after run_once() or
/// run_nowait(), when the loop next runs). If a tick began in between, they are counted from that
/// later reading instead: never early, but up to the time from the post to that reading late.
/// Other posts (finer units, a coarser resolution, outside the loop's callbacks) read the clock.
///
/// One loop timer drives the wheel. It is active only while the wheel is started and holds
/// entries, and is set for the next tick that has work (an entry to run, or a far slot to move
/// closer), so an idle wheel costs nothing and a far entry costs a handful of wake-ups.
///
/// Thread rules: like every watcher (see event::loop), a wheel may be created on any thread and
/// every member is loop-thread-only; debug builds assert it. Callbacks may post and cancel
/// (any entry, including others due in the same tick), and start() or stop() the wheel, but must
/// not destroy it.
///
/// Errors: an exception thrown by a callback goes to the loop's error handler; the entries left
/// in that tick still run, in order, in the loop's next round (before any later tick).
///
/// Neither copyable nor movable: the loop timer's callback points at the wheel.
class timer_wheel : noncopyable {
 public:
  /// Names a posted entry for cancel(). Never reused within one wheel's life; id{} is never
  /// issued.
  enum class id : std::uint64_t {};
  using duration = std::chrono::nanoseconds;

  /// A stopped, empty wheel on `owner`. Throws std::invalid_argument when `owner` is null or
  /// `resolution` is not positive.
  explicit timer_wheel(std::shared_ptr<loop> owner,
                       duration resolution = std::chrono::milliseconds(1));

  /// Destroys every entry left without running it (its callback is destroyed) and stops the
  /// loop timer. Must not be called from one of the wheel's callbacks. The destructor of a
  /// callback it destroys may still use the wheel: post() adds an entry as usual, which is
  /// destroyed unrun too before ~timer_wheel() returns (and never arms the timer); cancel()
  /// destroys an entry not destroyed yet and returns true, or returns false for one already
  /// gone. Entries are destroyed in no particular order.
  ~timer_wheel();

  /// Starts running entries as they fall due (overdue ones at once); does nothing when started.
  void start();

  /// Stops running entries; they stay, keep their due times and run once start() is called.
  /// From a wheel callback, the entries after it in the same tick wait too.
  void stop() noexcept;

  /// Adds `f` (a callable taking no arguments; a result is ignored), to run once `delay` from now
  /// (zero or negative: on the next tick; beyond 2^62 ns, about 146 years: after 2^62 ns). Works
  /// whether the wheel is started or not. `delay` is any std::chrono::duration with an integer
  /// count of a whole number of nanoseconds (ns, us, ms, s, min, h, ...); in milliseconds or
  /// seconds on a wheel whose resolution divides 1 ms (the default does), the due tick takes no
  /// division, and from a callback no clock read (see "Clock reads" above). Throws
  /// std::invalid_argument when `f` is empty (null, an empty function object), std::bad_alloc when
  /// the wheel cannot grow or a large closure cannot be boxed, and what moving `f` throws (nothing
  /// is added then).
  template <detail::wheel_callable F, detail::whole_nanoseconds D>
  id post(F&& f, D delay) {
    assert_loop_thread();
    constexpr std::uint64_t unit_ns = std::ratio_divide<typename D::period, std::nano>::num;
    constexpr auto max_delay = static_cast<std::uint64_t>(kMaxDelay.count());
    // At least one unit: a unit longer than kMaxDelay still means "later", not "now".
    const std::uint64_t units =
        detail::clamp_count(delay.count(), std::max<std::uint64_t>(max_delay / unit_ns, 1));
    if constexpr (unit_ns == 1'000'000 || unit_ns == 1'000'000'000) {
      const loop& owner = *get_loop();
      if (ceiling_ != kNoCeiling && owner.in_round()) [[likely]] {
        // Due as if posted at the cached reading, and checked against a later one (see batch_).
        constexpr std::uint64_t ms_per_unit = unit_ns / 1'000'000;
        const tick_type due = ceiling_ + units * (ticks_per_ms_ * ms_per_unit);
        const id entry = insert_at(due, std::forward<F>(f));
        add_to_batch(entry, due, owner.now());
        return entry;
      }
    }
    return insert_at(due_after(read_clock(), std::min(units * unit_ns, max_delay)),
                     std::forward<F>(f));
  }
  [[noreturn]] id post(std::nullptr_t, duration delay);

  /// Removes an entry that has not run yet and destroys its callback. Returns false when `entry`
  /// is unknown, already ran (or is running) or was already cancelled. Never throws.
  bool cancel(id entry) noexcept {
    assert_loop_thread();
    if (!core_.cancel(static_cast<detail::timer_wheel_core::id_type>(entry))) {
      return false;
    }
    if (core_.empty() && !core_.advancing()) {
      disarm();
    }
    return true;
  }

  /// Entries waiting to run.
  [[nodiscard]] std::size_t size() const noexcept { return core_.size(); }
  [[nodiscard]] bool empty() const noexcept { return core_.empty(); }

  /// True between start() and stop().
  [[nodiscard]] bool is_running() const noexcept { return running_; }

  /// True while the loop timer that drives the wheel is active (started and not empty).
  [[nodiscard]] bool is_armed() const noexcept { return timer_.is_active(); }

  [[nodiscard]] duration resolution() const noexcept { return resolution_; }

  /// Makes room for `entries` entries in total, so posting up to that many never allocates.
  void reserve(std::size_t entries);

  [[nodiscard]] const std::shared_ptr<loop>& get_loop() const noexcept { return timer_.get_loop(); }

 private:
  using tick_type = detail::timer_wheel_core::tick_type;
  static constexpr duration kMaxDelay{ std::int64_t{ 1 } << 62 };  // ~146 years

  // The loop-thread check of every member (debug builds).
  void assert_loop_thread() const noexcept {
    assert(get_loop()->may_be_used_here() &&
           "cyan::event::timer_wheel: loop-thread-only call made from another thread");
  }
  [[nodiscard]] tick_type tick_at(loop::clock::time_point t) const noexcept;
  template <typename F>
  id insert_at(tick_type due, F&& f) {
    const id entry{ core_.insert(due, std::forward<F>(f)) };
    // armed_for_ is kNever while the timer is stopped. An expiry delivered but not yet run
    // (is_pending) re-arms by itself.
    if (due < armed_for_ && running_ && !core_.advancing() && !timer_.is_pending()) {
      rearm();
    }
    return entry;
  }
  // The due tick of an entry posted `delay_ns` after `now` (ns since the clock's epoch), rounded
  // up to a tick boundary so that nothing runs early (the core moves a due tick not after its
  // now() to now() + 1); first brings an empty core up to date, then caches now's ceiling. Delays
  // are clamped to [0, kMaxDelay] by the caller, so that due ticks stay far from overflow.
  [[nodiscard]] tick_type due_after(std::uint64_t now, std::uint64_t delay_ns);
  // Reads the clock, and checks the batch against the reading (take_reading()).
  [[nodiscard]] std::uint64_t read_clock() noexcept;
  // Checks the batch against a clock reading `now` taken after its posts, postponing every
  // entry of it by the ticks that began since ceiling_, and moves a cached ceiling to the
  // reading's.
  void take_reading(std::uint64_t now) noexcept;
  void add_to_batch(id entry, tick_type due, loop::clock::time_point loop_time) noexcept {
    batch_[batch_size_] = batched{ entry, due };
    loop_time_at_last_post_ = loop_time;
    ++batch_size_;
    if (batch_size_ == 1 || batch_size_ == kBatchPosts) [[unlikely]] {
      on_batch_grown();
    }
  }
  // Watches for the end of the round when the batch starts; reads the clock when it is full.
  void on_batch_grown() noexcept;
  void postpone_batch(tick_type ticks) noexcept;
  struct batched {
    id entry;
    tick_type due;  // as posted: ceiling_ + the delay, before the core moved it past its now()
  };
  void on_round_end() noexcept;
  friend struct detail::wheel_round_end;
  void watch_round_end() noexcept;
  void unwatch_round_end() noexcept;
  // Drops the cached ceiling, first checking the batch's entries that are still waiting.
  void drop_ceiling() noexcept;
  void catch_up(loop::clock::time_point now) noexcept;
  [[nodiscard]] static std::uint64_t since_epoch(loop::clock::time_point t) noexcept {
    const auto ns = std::chrono::duration_cast<duration>(t.time_since_epoch()).count();
    return static_cast<std::uint64_t>(std::max(ns, std::int64_t{ 0 }));
  }
  void on_timer();
  void on_callback_error(std::exception_ptr error) noexcept;
  [[nodiscard]] loop::clock::duration time_until(tick_type tick) const noexcept;
  void rearm();
  void disarm() noexcept;

  duration resolution_;             // tick n starts n * resolution_ after loop::clock's epoch
  detail::wheel_divider per_tick_;  // divides nanoseconds by resolution_
  tick_type ticks_per_ms_;          // 1 ms / resolution_ when that is whole, else 0
  // The first tick boundary at or after the wheel's last clock reading (a post's that read the
  // clock, the loop timer's or a batch check's). Cached only while the resolution divides 1 ms
  // and the core is up to date (disarm(), which runs whenever the wheel empties or stops, drops
  // it); kNoCeiling when not cached.
  static constexpr tick_type kNoCeiling = std::numeric_limits<tick_type>::max();
  tick_type ceiling_ = kNoCeiling;
  // The batch: entries posted from a callback since the last reading, due at ceiling_ plus
  // their delay, as if posted at that reading. Each was posted before the next reading, which
  // checks them (take_reading()): while it lies at or before ceiling_, they are due exactly
  // when a reading of their own would have put them; otherwise each is postponed by the ticks
  // that began since (in post order, so equal delays keep their order). The next reading comes at
  // the latest when the loop next prepares to wait (round_end_, an ev_prepare started with the
  // batch), when the loop timer fires (before any entry runs), or when kBatchPosts posts have
  // filled the batch.
  // The most posts that share one reading: bounds how late a long run of posts is checked, and
  // keeps the read's cost per post small.
  static constexpr std::size_t kBatchPosts = 64;
  std::array<batched, kBatchPosts> batch_{};
  std::size_t batch_size_ = 0;
  // loop::now() at the batch's latest post. The loop's time changes only to a fresh clock
  // reading, so once it differs, it is a reading taken after every post of the batch: the check
  // at the round's end uses it instead of reading the clock again.
  loop::clock::time_point loop_time_at_last_post_{};
  detail::raw_watcher round_end_;
  detail::timer_wheel_core core_;
  timer timer_;  // after core_: destroyed (stopped) first, once ~timer_wheel() emptied core_
  tick_type armed_for_ = detail::timer_wheel_core::kNever;  // the tick timer_ is set for
  bool running_ = false;
  std::exception_ptr pending_error_;  // thrown by a callback, rethrown to the loop by on_timer()
};

}  // namespace cyan::event
