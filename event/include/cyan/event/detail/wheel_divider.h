#pragma once

#include <bit>
#include <cstdint>

namespace cyan::event::detail {

/// Unsigned 64-bit division by a divisor fixed at construction, with one multiplication and
/// shifts instead of a hardware divide: timer_wheel converts times to ticks on every post.
/// Exact for every dividend (Granlund & Montgomery, "Division by invariant integers using
/// multiplication", 1994, figure 4.1). Immutable after construction.
class wheel_divider {
 public:
  /// `divisor` must be positive.
  explicit constexpr wheel_divider(std::uint64_t divisor) noexcept : divisor_(divisor) {
    // l = ceil(log2(divisor)); magic = floor(2^64 * (2^l - divisor) / divisor) + 1 < 2^64.
    const unsigned l = divisor == 1 ? 0 : static_cast<unsigned>(std::bit_width(divisor - 1));
    const unsigned __int128 excess = (static_cast<unsigned __int128>(1) << l) - divisor;
    magic_ = static_cast<std::uint64_t>((excess << 64) / divisor + 1);
    shift1_ = l < 1 ? l : 1;
    shift2_ = l > 1 ? l - 1 : 0;
  }

  /// n / divisor, rounded down.
  [[nodiscard]] constexpr std::uint64_t divide(std::uint64_t n) const noexcept {
    const auto t1 = static_cast<std::uint64_t>(static_cast<unsigned __int128>(magic_) * n >> 64);
    return (t1 + ((n - t1) >> shift1_)) >> shift2_;
  }

  /// n / divisor, rounded up. `n` must be at most 2^64 - divisor (n + divisor - 1 must not wrap).
  [[nodiscard]] constexpr std::uint64_t divide_up(std::uint64_t n) const noexcept {
    return divide(n + (divisor_ - 1));
  }

  [[nodiscard]] constexpr std::uint64_t divisor() const noexcept { return divisor_; }

 private:
  std::uint64_t divisor_;
  std::uint64_t magic_ = 0;
  unsigned shift1_ = 0;
  unsigned shift2_ = 0;
};

}  // namespace cyan::event::detail
