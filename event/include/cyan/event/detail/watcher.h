#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"

namespace cyan::event {

class loop;

namespace detail {

/// Bytes that hold any libev watcher struct cyan uses (ev_io, ev_timer and ev_signal are the
/// largest: 48 bytes on LP64). watcher.cpp static_asserts that each one fits, which keeps <ev.h>
/// and its macros out of cyan's public headers.
inline constexpr std::size_t kRawWatcherSize = 48;

/// Storage for one libev watcher struct; 8-byte alignment covers its pointers and doubles.
struct alignas(8) raw_watcher {
  std::byte bytes[kRawWatcherSize];
};

/// The libev watcher type a cyan watcher wraps.
enum class watcher_kind : unsigned char { io, timer, signal, async, idle };

/// The machinery every watcher shares: the libev struct, its loop, start/stop, the pending
/// state, moving (the libev struct's data pointer follows the object) and exception routing.
///
/// Thread rules: a watcher is constructed on any thread; everything that touches its loop
/// (start, stop, reset, destruction while active) is loop-thread-only (see event::loop) and
/// asserted in debug builds.
///
/// Moving: libev keeps pointers to active and pending watchers, so moving an active watcher
/// starts the destination before it stops the source (a timer keeps its deadline, a signal
/// handler stays installed) and hands a pending event over; the callback moves with the object.
/// Moving an active watcher is therefore loop-thread-only; the moved-from watcher is inactive,
/// has no callback, keeps its loop and may be given a callback and restarted.
class watcher_base : noncopyable {
 public:
  /// True while started (a one-shot timer stops itself when it expires).
  [[nodiscard]] bool is_active() const noexcept;

  /// True when an event has arrived and the callback has not run yet.
  [[nodiscard]] bool is_pending() const noexcept;

  /// Stops the watcher and drops an event not yet delivered. Stopping an inactive watcher does
  /// nothing. May be called from the watcher's own callback.
  void stop() noexcept;

  /// The loop this watcher belongs to.
  [[nodiscard]] const std::shared_ptr<event::loop>& get_loop() const noexcept { return loop_; }

 protected:
  /// Throws std::invalid_argument when `owner` is null.
  watcher_base(watcher_kind kind, std::shared_ptr<event::loop> owner);
  watcher_base(watcher_base&& other) noexcept;
  watcher_base& operator=(watcher_base&& other) noexcept;
  ~watcher_base();

  /// Starts the libev watcher with the parameters already in the raw struct; does nothing when
  /// active. Drops an expiry of the previous run not yet delivered.
  void start_raw();

  /// Runs the user's callback for libev's `revents`; exceptions go to the loop's error handler.
  /// Touches nothing of `*this` after the callback returns, so the callback may destroy it.
  void dispatch(int revents) noexcept;

  /// Called for each libev event. The default dispatches at once; a timer queues its expiry so
  /// that equal deadlines run in start order.
  virtual void on_raw_event(int revents) noexcept { dispatch(revents); }

  /// Defers this watcher's event to the end of the loop round, where the queued events run
  /// sorted by (deadline, sequence). Dispatches at once if the queue cannot grow.
  void queue_event(double deadline, std::uint64_t sequence, int revents) noexcept;

  /// Calls the user's callback (basic_watcher implements it).
  virtual void invoke_callback(int revents) = 0;

  /// Asserts, in debug builds, that the caller runs on the loop's thread.
  void assert_loop_thread() const noexcept;

  raw_watcher& raw() noexcept { return raw_; }
  const raw_watcher& raw() const noexcept { return raw_; }

 private:
  friend class event::loop;
  template <typename Raw>
  friend struct libev_callback;

  static constexpr std::size_t kNotQueued = std::numeric_limits<std::size_t>::max();

  void initialize_raw() noexcept;
  void take(watcher_base& other) noexcept;
  void stop_raw() noexcept;
  void cancel_queued() noexcept;

  std::shared_ptr<event::loop> loop_;
  raw_watcher raw_;
  watcher_kind kind_;
  /// Index in the loop's queue of expired timers, or kNotQueued.
  std::size_t queued_slot_ = kNotQueued;
};

/// watcher_base plus the user's callback, called with `Args` built from libev's event mask
/// (io passes the ready events; the other watchers take no arguments).
template <typename... Args>
class basic_watcher : public watcher_base {
 public:
  using callback_type = unique_function<void(Args...)>;

  /// Sets the function the loop's thread runs for each event; an empty one ignores events.
  /// Replacing the callback (or destroying the watcher) from inside the running callback is
  /// allowed: the running closure is destroyed at once and must not touch its captures after.
  void set_callback(callback_type callback) noexcept { callback_ = std::move(callback); }

 protected:
  using watcher_base::watcher_base;
  basic_watcher(basic_watcher&&) noexcept = default;
  basic_watcher& operator=(basic_watcher&&) noexcept = default;
  ~basic_watcher() = default;

 private:
  void invoke_callback([[maybe_unused]] int revents) final {
    if (callback_) {
      callback_(static_cast<Args>(revents)...);
    }
  }

  callback_type callback_;
};

/// An event deferred by queue_event(); the loop sorts them by (deadline, sequence).
struct queued_event {
  double deadline;
  std::uint64_t sequence;
  watcher_base* watcher;  // null once stopped or destroyed
  int revents;
};

}  // namespace detail
}  // namespace cyan::event
