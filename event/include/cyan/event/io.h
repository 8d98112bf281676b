#pragma once

#include <memory>

#include "cyan/event/detail/watcher.h"
#include "cyan/event/loop.h"

namespace cyan::event {

/// A set of file-descriptor readiness events.
enum class io_events : unsigned {
  none = 0,
  read = 0x01,   ///< readable (or at end of file / hung up)
  write = 0x02,  ///< writable
};

[[nodiscard]] constexpr io_events operator|(io_events a, io_events b) noexcept {
  return static_cast<io_events>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

[[nodiscard]] constexpr io_events operator&(io_events a, io_events b) noexcept {
  return static_cast<io_events>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}

/// True when `set` holds every event in `wanted` (and `wanted` is not empty).
[[nodiscard]] constexpr bool has(io_events set, io_events wanted) noexcept {
  return wanted != io_events::none && (set & wanted) == wanted;
}

/// Runs its callback when a file descriptor becomes ready, with the ready events. Level
/// triggered: it runs every loop round while the descriptor stays ready, until the data is
/// consumed or the watcher stopped. The watcher does not own the descriptor: stop it before
/// closing the descriptor (libev treats a closed descriptor under a watcher as a program bug;
/// Debian's libev aborts). When libev cannot watch the descriptor for another reason it stops
/// the watcher and reports read | write, so the next read or write reports the error.
///
/// Thread rules and moving: see detail::watcher_base.
class io : public detail::basic_watcher<io_events> {
 public:
  using events = io_events;
  static constexpr events read = io_events::read;
  static constexpr events write = io_events::write;

  /// Throws std::invalid_argument when `owner` is null.
  explicit io(std::shared_ptr<loop> owner);
  io(io&& other) noexcept = default;
  io& operator=(io&& other) noexcept = default;
  ~io() = default;

  /// The descriptor to watch. Restarts an active watcher. Throws std::invalid_argument when
  /// negative, std::system_error (EBADF) when it is not open.
  void set_file_descriptor(int fd);

  /// The watched descriptor, or -1 before set_file_descriptor().
  [[nodiscard]] int file_descriptor() const noexcept;

  /// The events to wait for (io::read, io::write or both). Restarts an active watcher, so the
  /// change applies at once. Throws std::invalid_argument for other bits.
  void set_events(events interest);

  /// The events set by set_events().
  [[nodiscard]] events interest() const noexcept;

  /// Starts watching; does nothing when already active. Throws std::logic_error before
  /// set_file_descriptor().
  void start();

 private:
  void on_raw_event(int revents) noexcept override;
  void configure(int fd, events interest);
};

}  // namespace cyan::event
