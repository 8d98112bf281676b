#pragma once

// Durations and deadlines that saturate instead of overflowing: a delay of hours::max() or a
// timeout of a century must mean "never", not wrap around into the past. Every conversion of a
// caller's delay into a clock's duration or deadline goes through these.

#include <chrono>

namespace cyan::detail {

/// `delay` rounded up to a whole To, or `limit` when `delay` is `limit` or more. Compared in
/// floating point, which cannot overflow whatever the two types' periods and ranges.
template <typename To, typename Rep, typename Period>
[[nodiscard]] constexpr To saturating_ceil(std::chrono::duration<Rep, Period> delay,
                                           To limit = To::max()) noexcept {
  using seconds = std::chrono::duration<double>;
  if (seconds(delay) >= seconds(limit)) {
    return limit;
  }
  return std::chrono::ceil<To>(delay);
}

/// `from + delay`, rounded up to the clock's tick; time_point::max() ("never") when that lies
/// past the clock's range.
template <typename Clock, typename Duration, typename Rep, typename Period>
[[nodiscard]] constexpr std::chrono::time_point<Clock, Duration> saturating_add(
    std::chrono::time_point<Clock, Duration> from,
    std::chrono::duration<Rep, Period> delay) noexcept {
  using time_point = std::chrono::time_point<Clock, Duration>;
  return from + saturating_ceil<Duration>(delay, time_point::max() - from);
}

}  // namespace cyan::detail
