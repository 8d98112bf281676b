#pragma once

#include <memory>

#include "cyan/event/detail/watcher.h"
#include "cyan/event/loop.h"

namespace cyan::event {

/// Runs its callback once per loop round while the loop has nothing else to do (no other
/// callback due); while one is active the loop polls without blocking. Stop it when its work is
/// done, or it keeps the loop spinning.
///
/// Thread rules and moving: see detail::watcher_base.
class idle : public detail::basic_watcher<> {
 public:
  /// Throws std::invalid_argument when `owner` is null.
  explicit idle(std::shared_ptr<loop> owner);
  idle(idle&& other) noexcept = default;
  idle& operator=(idle&& other) noexcept = default;
  ~idle() = default;

  /// Starts the watcher; does nothing when already active.
  void start() { start_raw(); }
};

}  // namespace cyan::event
