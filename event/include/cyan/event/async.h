#pragma once

#include <atomic>
#include <memory>

#include "cyan/common/cache_line.h"
#include "cyan/event/detail/watcher.h"
#include "cyan/event/loop.h"

namespace cyan::event {

/// Wakes its loop from any thread (or a signal handler) and runs its callback there.
///
/// Sends are coalesced: N sends made before the callback runs give at least one callback, which
/// runs after the last of them and sees everything each sender wrote before its send() (send()
/// is a release, the callback starts with an acquire). Sends made while the watcher is stopped
/// are delivered once it is started again.
///
/// Thread rules: send() is [any thread] and async-signal-safe; everything else is
/// loop-thread-only. The watcher must outlive every send() (stop the senders, then destroy it),
/// and must not be moved while another thread may send.
class async : public detail::basic_watcher<> {
 public:
  /// Throws std::invalid_argument when `owner` is null.
  explicit async(std::shared_ptr<loop> owner);
  async(async&& other) noexcept;
  async& operator=(async&& other) noexcept;
  ~async() = default;

  /// Starts listening; delivers a send that arrived while stopped.
  void start();

  /// Asks the loop to run the callback. [any thread, async-signal-safe]
  void send() noexcept;

 private:
  void on_raw_event(int revents) noexcept override;
  void take_sent(async& other) noexcept;

  /// True from a send() until the loop thread takes it; written by senders and the loop thread,
  /// on its own cache line because senders hammer it.
  cache_padded<std::atomic<bool>> sent_;
};

}  // namespace cyan::event
