#pragma once

// Whether a handler thread that its loop woke (io, a timer) makes a non-blocking turn of the
// loop before it announces its next sleep (step 4 of the round in handler_thread_runtime.cpp).
//
// After an io wake-up the next event is often the loop's again (a pipe chain, a burst of
// requests), and a non-blocking turn finds it without announcing a sleep. On a request/response
// socket at light load it finds nothing: the reply went out and the next request is a round
// trip away, so the turn is one wasted epoll_wait per message (~1.5 us of CPU in this VM,
// docs/bench/notes.md). So the turn adapts, as socket reads do (net/detail/socket_core.h): once
// the first turns after two wake-ups in a row found nothing, wake-ups go straight to the sleep
// (whose blocking turn returns at once if events did come), trying the turn again after 16 such
// wake-ups, then after twice as many each time it misses again, up to 256, and for good once
// such a try finds an event. Skipping is never wrong, only slower when events were there.

#include <cstdint>

namespace cyan::dispatch::detail {

class wake_poll_policy {
 public:
  /// Whether this wake-up should make the non-blocking turn first.
  [[nodiscard]] bool should_poll() noexcept {
    if (misses_ < kMissesToSkip) {
      return true;
    }
    if (++skipped_ < (1u << retry_shift_)) {
      return false;
    }
    skipped_ = 0;
    return true;
  }

  /// Records what that turn found.
  void polled(bool found) noexcept {
    if (found) {
      misses_ = 0;
      retry_shift_ = kFirstRetryShift;
    } else if (misses_ < kMissesToSkip) {
      ++misses_;
    } else if (retry_shift_ < kLastRetryShift) {
      ++retry_shift_;  // a retry that missed: the pattern holds, try less often
    }
  }

 private:
  static constexpr std::uint8_t kMissesToSkip = 2;
  static constexpr std::uint8_t kFirstRetryShift = 4;  // the first retry after 16 wake-ups
  static constexpr std::uint8_t kLastRetryShift = 8;   // retries at least every 256th
  std::uint8_t misses_ = 0;                            // first turns in a row that found nothing
  std::uint8_t retry_shift_ = kFirstRetryShift;
  std::uint16_t skipped_ = 0;  // wake-ups that skipped the turn since the last try
};

}  // namespace cyan::dispatch::detail
