#include "load/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace cyan::examples {

std::size_t latency_histogram::bucket_of(std::uint64_t value) noexcept {
  if (value < kSubBuckets) {
    return static_cast<std::size_t>(value);
  }
  // The top kSubBucketBits + 1 bits of the value: the leading one picks the power of two, the
  // four after it the sub-bucket.
  const unsigned shift = static_cast<unsigned>(std::bit_width(value)) - 1 - kSubBucketBits;
  const std::uint64_t sub = (value >> shift) - kSubBuckets;
  return static_cast<std::size_t>(kSubBuckets + shift * kSubBuckets + sub);
}

std::uint64_t latency_histogram::highest_in(std::size_t bucket) noexcept {
  if (bucket < kSubBuckets) {
    return bucket;
  }
  const std::size_t shift = (bucket - kSubBuckets) / kSubBuckets;
  const std::uint64_t sub = (bucket - kSubBuckets) % kSubBuckets;
  const std::uint64_t lowest = (kSubBuckets + sub) << shift;
  return lowest + ((std::uint64_t{ 1 } << shift) - 1);
}

void latency_histogram::record(std::uint64_t value) noexcept {
  ++counts_[bucket_of(value)];
  ++count_;
  max_ = std::max(max_, value);
}

void latency_histogram::merge(const latency_histogram& other) noexcept {
  for (std::size_t i = 0; i < kBuckets; ++i) {
    counts_[i] += other.counts_[i];
  }
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
}

std::uint64_t latency_histogram::percentile(double fraction) const noexcept {
  if (count_ == 0) {
    return 0;
  }
  const double wanted = std::ceil(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(count_));
  const std::uint64_t rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(wanted));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      return std::min(highest_in(i), max_);
    }
  }
  return max_;
}

}  // namespace cyan::examples
