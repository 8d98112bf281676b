#pragma once

// How a thread waits for another that is between two steps of a lock-free protocol (a producer
// between claiming a slot and filling it, a consumer that found nothing yet): the other thread
// is usually a few instructions from done, but may have been preempted, since the machine may
// run more threads than it has cores.

#include <cstddef>
#include <thread>

#include "cyan/common/cache_line.h"

namespace cyan::detail {

/// The waits of one thread in one such spot (crossbeam's Backoff::snooze): the first spin 1, 2,
/// 4, ... 64 pauses, each one after them yields the CPU. Spinning a little longer each time lets
/// the other thread get ahead instead of fighting it for the same cache lines; yielding gives a
/// preempted one the CPU. reset() once the other thread made progress.
class backoff {
 public:
  /// Waits once. [the waiting thread]
  void wait() noexcept {
    if (step_ <= kLastSpinStep) {
      for (unsigned i = 0; i < 1u << step_; ++i) {
        cpu_relax();
      }
      ++step_;
    } else {
      std::this_thread::yield();
    }
  }
  /// The next wait spins the shortest again.
  void reset() noexcept { step_ = 0; }
  /// wait() after a call that made no progress (`progress` == 0); reset() after one that did.
  void after(std::size_t progress) noexcept { progress == 0 ? wait() : reset(); }

 private:
  // The longest spin, 2^6 = 64 pauses: a thread still not done after it is likely preempted.
  static constexpr unsigned kLastSpinStep = 6;
  unsigned step_ = 0;
};

}  // namespace cyan::detail
