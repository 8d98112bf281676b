#pragma once

namespace cyan::dispatch {

/// What stop() does with work that has not started yet.
enum class stop_mode {
  /// Runs everything already posted (and delayed work already due), then stops; token tasks
  /// posted before the stop are run when their turn comes, however late. Delayed work that is
  /// not due yet is cancelled.
  drain,
  /// Runs nothing more: every task not started yet is cancelled. The task running when stop()
  /// is called finishes.
  discard,
};

}  // namespace cyan::dispatch
