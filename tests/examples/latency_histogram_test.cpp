// load_tester's latency histogram: bucket edges, the 1/16 precision, percentiles and merge.

#include "load/latency_histogram.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace {

using cyan::examples::latency_histogram;

TEST(latency_histogram, small_values_have_a_bucket_each) {
  for (std::uint64_t v = 0; v < 16; ++v) {
    EXPECT_EQ(latency_histogram::bucket_of(v), v);
    EXPECT_EQ(latency_histogram::highest_in(v), v);
  }
  // 16..31 still one value per bucket; 32..63 two; 64..127 four.
  EXPECT_EQ(latency_histogram::bucket_of(16), 16u);
  EXPECT_EQ(latency_histogram::bucket_of(31), 31u);
  EXPECT_EQ(latency_histogram::bucket_of(32), 32u);
  EXPECT_EQ(latency_histogram::bucket_of(33), 32u);
  EXPECT_EQ(latency_histogram::highest_in(32), 33u);
  EXPECT_EQ(latency_histogram::bucket_of(64), 48u);
  EXPECT_EQ(latency_histogram::highest_in(48), 67u);
}

TEST(latency_histogram, every_bucket_holds_its_values_within_a_sixteenth) {
  for (std::uint64_t v = 1; v < (1u << 20); v = v * 17 / 16 + 1) {
    const std::size_t bucket = latency_histogram::bucket_of(v);
    const std::uint64_t highest = latency_histogram::highest_in(bucket);
    EXPECT_GE(highest, v);
    EXPECT_LE(static_cast<double>(highest - v), static_cast<double>(v) / 16.0) << v;
    EXPECT_EQ(latency_histogram::bucket_of(highest), bucket) << v;
    EXPECT_EQ(latency_histogram::bucket_of(highest + 1), bucket + 1) << v;
  }
  const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(latency_histogram::highest_in(latency_histogram::bucket_of(top)), top);
}

TEST(latency_histogram, percentiles_of_known_values) {
  latency_histogram h;
  EXPECT_EQ(h.percentile(0.5), 0u);
  for (std::uint64_t v = 1; v <= 100; ++v) {
    h.record(v * 1000);  // 1..100 µs in ns
  }
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.max(), 100000u);
  // The 50th value is 50,000 ns: its bucket [49152, 51199] reports its top.
  EXPECT_EQ(h.percentile(0.50), 51199u);
  // The 99th, 99,000 ns, is in [98304, 102399], whose top is above max(): max() it is.
  EXPECT_EQ(h.percentile(0.98), 98303u);  // 98,000 ns: [94208, 98303]
  EXPECT_EQ(h.percentile(0.99), 100000u);
  EXPECT_EQ(h.percentile(1.0), 100000u);
  EXPECT_EQ(h.percentile(0.0), 1023u);  // rank 1: the first value, 1,000 ns in [992, 1023]
}

TEST(latency_histogram, merge_adds_counts_and_keeps_the_max) {
  latency_histogram a;
  latency_histogram b;
  for (int i = 0; i < 90; ++i) {
    a.record(10);
  }
  for (int i = 0; i < 10; ++i) {
    b.record(5000);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), 100u);
  EXPECT_EQ(a.max(), 5000u);
  EXPECT_EQ(a.percentile(0.90), 10u);
  EXPECT_EQ(a.percentile(0.91), 5000u);  // bucket [4864, 5119], capped at max()
}

}  // namespace
