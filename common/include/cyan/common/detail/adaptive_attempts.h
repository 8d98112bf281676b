#pragma once

// An attempt that is usually worth making, until a pattern shows it is not: a speculative
// read that keeps finding nothing (net/detail/socket_core.h), a non-blocking loop turn after an
// io wake-up that keeps finding no event, a heavy fence before a sleep that keeps being dear
// (both in dispatch's handler thread). Attempts are made until two in a row miss; then only
// after 16 skipped occasions, then after twice as many each time such a retry misses again, up
// to 256; one that hits makes them all again. Skipping must never be wrong, only slower when
// the attempt would have hit.

#include <cstdint>

namespace cyan::detail {

class adaptive_attempts {
 public:
  /// Whether to make the attempt on this occasion.
  [[nodiscard]] bool should_try() noexcept {
    if (misses_ < kMissesToSkip) {
      return true;
    }
    if (++skipped_ < (1u << retry_shift_)) {
      return false;
    }
    skipped_ = 0;
    return true;
  }

  /// Records what an attempt found.
  void record(bool hit) noexcept {
    if (hit) {
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
  static constexpr std::uint8_t kFirstRetryShift = 4;  // the first retry after 16 occasions
  static constexpr std::uint8_t kLastRetryShift = 8;   // retries at least every 256th
  std::uint8_t misses_ = 0;                            // attempts in a row that missed
  std::uint8_t retry_shift_ = kFirstRetryShift;  // log2 of the occasions to skip before a retry
  std::uint16_t skipped_ = 0;                    // occasions skipped since the last attempt
};

}  // namespace cyan::detail
