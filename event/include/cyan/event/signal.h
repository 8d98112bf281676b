#pragma once

#include <memory>

#include "cyan/event/detail/watcher.h"
#include "cyan/event/loop.h"

namespace cyan::event {

/// Runs its callback on the main loop's thread after the process receives a signal. Signals
/// that arrive before the callback runs are coalesced into one callback.
///
/// libev lets one loop own a given signal, so cyan gives them all to the main loop
/// (get_main_loop()): constructing a signal watcher on any other loop is an error, which also
/// rules out the same signal number being watched by two loops. Several watchers on the main
/// loop may watch the same number; all of them run. libev installs its handler when the first
/// watcher for a number starts and restores the default disposition when the last one stops.
///
/// Thread rules and moving: see detail::watcher_base (a moved active watcher keeps the handler
/// installed).
class signal : public detail::basic_watcher<> {
 public:
  /// Throws std::invalid_argument when `owner` is null or is not the main loop.
  explicit signal(std::shared_ptr<loop> owner);
  signal(signal&& other) noexcept = default;
  signal& operator=(signal&& other) noexcept = default;
  ~signal() = default;

  /// The signal to watch (SIGINT, SIGUSR1, ...). Restarts an active watcher on the new number.
  /// Throws std::invalid_argument for numbers outside 1..NSIG-1 and for SIGKILL and SIGSTOP,
  /// which cannot be caught.
  void set_number(int number);

  /// The watched signal, or 0 before set_number().
  [[nodiscard]] int number() const noexcept;

  /// Starts watching; does nothing when already active. Throws std::logic_error before
  /// set_number().
  void start();
};

}  // namespace cyan::event
