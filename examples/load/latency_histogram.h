#pragma once

// A latency histogram with log-spaced buckets, as HdrHistogram has them: every power of two is
// split into 16 equal sub-buckets, so a recorded value is known to within 1/16 (6.25%) of
// itself, from 1 ns to hours, in a fixed 8 KiB of counts. One per thread; merge() them at the
// end. No allocation when recording.

#include <array>
#include <cstddef>
#include <cstdint>

namespace cyan::examples {

/// Counts of values (nanoseconds, say) in log-spaced buckets. Not thread-safe: one writer,
/// merged into another after that writer is done.
class latency_histogram {
 public:
  /// Counts `value` once.
  void record(std::uint64_t value) noexcept;
  /// Adds every count of `other`.
  void merge(const latency_histogram& other) noexcept;

  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  /// The exact largest value recorded (0 when empty).
  [[nodiscard]] std::uint64_t max() const noexcept { return max_; }
  /// The smallest value v such that at least `fraction` (0..1] of the recorded values are
  /// <= v, up to the bucket's width: the highest value of the bucket it falls in (never above
  /// max()). 0 when empty.
  [[nodiscard]] std::uint64_t percentile(double fraction) const noexcept;

  /// The bucket `value` falls in, and the highest value that bucket holds (exposed for tests).
  [[nodiscard]] static std::size_t bucket_of(std::uint64_t value) noexcept;
  [[nodiscard]] static std::uint64_t highest_in(std::size_t bucket) noexcept;

 private:
  static constexpr unsigned kSubBucketBits = 4;
  static constexpr std::uint64_t kSubBuckets = 1u << kSubBucketBits;
  // Values below 16 get one bucket each; each of the 60 powers of two above, 16.
  static constexpr std::size_t kBuckets = kSubBuckets + (64 - kSubBucketBits) * kSubBuckets;

  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
};

}  // namespace cyan::examples
